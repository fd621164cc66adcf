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

A database outage (``OperationalError``, ``InterfaceError``: connection refused, server closed,
restarting) is answered with the styled 503 page (``503.html``, with ``Retry-After``), by the
middleware for an error raised in a view and by :func:`server_error` (``handler500``) for one
raised outside a view; under ``/api/`` both answer the JSON 503 of ``labeling/api_errors.py``.
The 503 page is rendered without touching the database: no user, no messages.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views import defaults

from labeling import api_errors
from labeling.exceptions import LabelingError
from labeling.http_errors import http_status

#: The template of a 400 or 409 page (its context: ``status``, ``error``).
ERROR_TEMPLATE = "error.html"
#: The template of the database-outage page.
UNAVAILABLE_TEMPLATE = "503.html"


def database_unavailable_page(request: HttpRequest, error: Exception) -> HttpResponse:
    """Answer a request that met a database outage: the API's JSON 503 or the styled page.

    The page extends the layout but reads nothing from the database (``user`` and
    ``messages`` are set empty, so neither the session nor the user is loaded).
    """
    if api_errors.is_api_path(request):
        return api_errors.database_unavailable(request, error)
    api_errors.logger.error(
        "database unavailable: %s",
        type(error).__name__,
        extra={"path": request.path, "method": request.method},
    )
    context = {
        "user": None,
        "messages": (),
        "retry_after": api_errors.retry_after_seconds(),
    }
    response = render(request, UNAVAILABLE_TEMPLATE, context, status=503)
    response["Retry-After"] = str(api_errors.retry_after_seconds())
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: a database outage is a 503; under ``/api/`` JSON; else Django's 500."""
    error = sys.exc_info()[1]
    if isinstance(error, api_errors.DATABASE_ERRORS):
        return database_unavailable_page(request, error)
    if api_errors.is_api_path(request):
        return api_errors.api_error_response(500, "internal server error", api_errors.SERVER_ERROR)
    return defaults.server_error(request)


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
        """Answer a domain error or a database outage; leave any other exception to Django."""
        if isinstance(exception, api_errors.DATABASE_ERRORS):
            return database_unavailable_page(request, exception)
        if not isinstance(exception, LabelingError):
            return None
        return domain_error_response(request, exception)
