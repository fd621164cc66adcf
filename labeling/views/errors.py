"""Domain errors that a page did not handle, as the page of their HTTP status.

:class:`DomainErrorMiddleware` (in ``settings.MIDDLEWARE``) catches a
:class:`~labeling.exceptions.LabelingError` escaping an HTML view and answers with the status of
``labeling/http_errors.py``, the table the REST API uses: not found is Django's 404 page, a
forbidden operation its 403 page, and a bad transition, a conflict or bad input a page in the
site's layout with the error's message (409 or 400). So views raise through (a non-member's
``NotFound`` is a 404) and catch a domain error only to show it on a form or in a message,
placed by its ``field`` (``labeling.views.common.form_add_domain_error``,
``labeling.views.labels.errors_from``). DRF views never get here: their handler
(``labeling/api_errors.py``) answers first.
"""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from labeling.exceptions import LabelingError
from labeling.http_errors import http_status

#: The template of a 400 or 409 page (its context: ``status``, ``error``).
ERROR_TEMPLATE = "error.html"


def domain_error_response(request: HttpRequest, error: LabelingError) -> HttpResponse:
    """Answer a page request that raised ``error`` with the page of its HTTP status.

    Raises:
        Http404: ``error`` maps to 404 (Django renders its not-found page).
        PermissionDenied: ``error`` maps to 403 (Django renders its forbidden page).
    """
    status = http_status(error)
    if status == 404:
        raise Http404(error.message) from error
    if status == 403:
        raise PermissionDenied(error.message) from error
    context = {"status": status, "error": error}
    return render(request, ERROR_TEMPLATE, context, status=status)


class DomainErrorMiddleware:
    """Turn a domain error escaping a view into the page of its status (see the module)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        """Answer a domain error; leave any other exception to Django."""
        if not isinstance(exception, LabelingError):
            return None
        return domain_error_response(request, exception)
