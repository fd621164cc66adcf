"""The one error contract of ``/api/``: every 4xx and 5xx is JSON of one shape.

Every error response under ``/api/`` has the body::

    {"detail": str, "code": str, "errors": [{"field": str | null, "reason": str, ...}, ...]}

- ``detail`` reads on its own; ``code`` is stable and machine-readable (``invalid_input``,
  ``not_found``, ``method_not_allowed``, ``throttled``, ``service_unavailable``...);
- ``errors`` lists what is wrong, one item per input: ``field`` names the input (a dotted path
  such as ``claims[1].evidence[0].quote``, a query parameter such as ``limit``, or null for the
  request as a whole). An import's refused records keep their ``location`` (e.g. ``line 12``) as
  an extra key of each item;
- a domain error (``labeling/exceptions.py``) adds ``field`` at the top when it names one, and
  its ``data`` (e.g. the versions of a stale object).

Produced by :func:`exception_handler` (DRF's ``EXCEPTION_HANDLER``), by
:class:`ApiErrorMiddleware` (a database outage becomes a 503 with ``Retry-After``; any other
non-JSON error response under ``/api/`` is replaced by the JSON of its status) and by
``labeling.views.errors.server_error`` (``handler500``), so that no path answers HTML or DRF's
field dicts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.serializers import as_serializer_error
from rest_framework.settings import api_settings
from rest_framework.views import exception_handler as drf_exception_handler

from labeling import exceptions as domain
from labeling.exceptions import ErrorCode
from labeling.http_errors import http_status

logger = logging.getLogger(__name__)

#: The path prefix the contract covers.
API_PREFIX = "/api/"
#: The errors that mean the database cannot be reached (refused, closed, restarting, locked).
DATABASE_ERRORS: tuple[type[Exception], ...] = (OperationalError, InterfaceError)
#: The ``code`` of a validation error (DRF's field errors; as the domain's ``InvalidInput``).
INVALID_INPUT = ErrorCode.INVALID_INPUT
#: The code of a database outage.
SERVICE_UNAVAILABLE = ErrorCode.SERVICE_UNAVAILABLE
#: The code of an unexpected server error.
SERVER_ERROR = ErrorCode.SERVER_ERROR

#: The ``code`` of a status Django answered by itself (no DRF exception behind it).
CODE_BY_STATUS: dict[int, ErrorCode] = {
    400: ErrorCode.BAD_REQUEST,
    401: ErrorCode.NOT_AUTHENTICATED,
    403: ErrorCode.PERMISSION_DENIED,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    406: ErrorCode.NOT_ACCEPTABLE,
    413: ErrorCode.REQUEST_TOO_LARGE,
    415: ErrorCode.UNSUPPORTED_MEDIA_TYPE,
    429: ErrorCode.THROTTLED,
    500: SERVER_ERROR,
    503: SERVICE_UNAVAILABLE,
}


def is_api_path(request: HttpRequest) -> bool:
    """Tell whether ``request`` is under ``/api/``, the paths the JSON contract covers."""
    return request.path.startswith(API_PREFIX)


def retry_after_seconds() -> int:
    """Return the ``Retry-After`` of a 503 (``CERTLABEL_RETRY_AFTER_SECONDS``, default 5)."""
    return int(getattr(settings, "CERTLABEL_RETRY_AFTER_SECONDS", 5))


def error_body(
    detail: str,
    code: str,
    errors: Sequence[Mapping[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Return an error body of the contract; ``errors`` defaults to one item about the request.

    Args:
        detail: What went wrong, readable on its own.
        code: The stable code.
        errors: One item per input at fault, each with ``field`` and ``reason`` (and extra keys,
            e.g. an import's ``location``); None: one item, ``field`` null, ``reason`` the detail.
        **extra: Further top-level keys (a domain error's ``field`` and ``data``).
    """
    items = [dict(e) for e in errors] if errors else [{"field": None, "reason": detail}]
    return {"detail": detail, "code": code, "errors": items, **extra}


def _flatten(detail: Any, path: str | None = None) -> list[dict[str, Any]]:
    """Turn DRF's nested validation detail into ``[{"field", "reason"}]`` (dotted paths)."""
    if isinstance(detail, Mapping):
        items: list[dict[str, Any]] = []
        for key, value in detail.items():
            if key == api_settings.NON_FIELD_ERRORS_KEY:
                items += _flatten(value, path)
            elif isinstance(key, int) or str(key).isdigit():
                items += _flatten(value, f"{path or ''}[{key}]")
            else:
                items += _flatten(value, f"{path}.{key}" if path else str(key))
        return items
    if isinstance(detail, list):
        if all(isinstance(d, str) for d in detail):
            return [{"field": path, "reason": str(d)} for d in detail]
        items = []
        for index, value in enumerate(detail):
            if value in ({}, [], None):
                continue  # a valid element of a list of objects
            items += _flatten(value, f"{path or ''}[{index}]")
        return items
    return [{"field": path, "reason": str(detail)}]


def validation_body(detail: Any) -> dict[str, Any]:
    """Return the body of a DRF validation error: its field dict as the ``errors`` list."""
    errors = _flatten(detail) or [{"field": None, "reason": "invalid input"}]
    first = errors[0]
    summary = f"{first['field']}: {first['reason']}" if first["field"] else first["reason"]
    if len(errors) > 1:
        summary += f" (and {len(errors) - 1} more)"
    return error_body(summary, INVALID_INPUT, errors)


class DomainAPIException(exceptions.APIException):
    """A domain error converted for DRF, keeping its code, field and data."""

    def __init__(self, error: domain.LabelingError, status_code: int) -> None:
        super().__init__(detail=error.message, code=error.code)
        self.status_code = status_code
        self.error = error


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Answer an exception raised in a DRF view with the contract's body (see the module).

    Domain errors get the status of ``labeling/http_errors.py``; a Django ``ValidationError``
    is a validation error; DRF's exceptions keep their status and headers (``Retry-After`` of
    a 429, ``WWW-Authenticate`` of a 401). Anything else returns None: DRF re-raises it and
    :class:`ApiErrorMiddleware` (a database outage) or Django's 500 handling answers it.
    """
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(as_serializer_error(exc))
    elif isinstance(exc, Http404):  # e.g. a ?format= no renderer serves
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, domain.LabelingError):
        exc = DomainAPIException(exc, http_status(exc))
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, DomainAPIException):
        response.data = exc.error.body()
    elif isinstance(exc, exceptions.ValidationError):
        response.data = validation_body(exc.detail)
    elif isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        code = (
            codes
            if isinstance(codes, str)
            else CODE_BY_STATUS.get(exc.status_code, ErrorCode.ERROR)
        )
        wait = getattr(exc, "wait", None) if isinstance(exc, exceptions.Throttled) else None
        extra = {"wait": wait} if wait else {}
        response.data = error_body(str(exc.detail), code, **extra)
    return response


def api_error_response(
    status: int, detail: str | None = None, code: str | None = None
) -> JsonResponse:
    """Return the contract's JSON response of ``status`` (a 503 with ``Retry-After``)."""
    phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
    body = error_body(detail or phrase, code or CODE_BY_STATUS.get(status, ErrorCode.ERROR))
    response = JsonResponse(body, status=status)
    if status == HTTPStatus.SERVICE_UNAVAILABLE:
        response["Retry-After"] = str(retry_after_seconds())
    return response


def database_unavailable(request: HttpRequest, error: Exception) -> JsonResponse:
    """Return the API's 503 for a database error (logged, without the connection details)."""
    logger.error(
        "database unavailable: %s",
        type(error).__name__,
        extra={"path": request.path, "method": request.method},
    )
    return api_error_response(
        HTTPStatus.SERVICE_UNAVAILABLE,
        "the database is unavailable; nothing was written by this request: retry later",
        SERVICE_UNAVAILABLE,
    )


class ApiErrorMiddleware:
    """Keep every error under ``/api/`` in the JSON contract (see the module).

    ``process_exception`` answers a database error of a view with a 503 and ``Retry-After``;
    ``__call__`` replaces any error response under ``/api/`` that is not JSON (Django's own
    404 of an unresolved URL, 400, 413 or 500 page) with the contract's body of its status.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        """Answer the request; an error response under ``/api/`` that is not JSON becomes JSON."""
        response = self.get_response(request)
        if (
            is_api_path(request)
            and response.status_code >= 400
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            return api_error_response(response.status_code)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        """Answer a database error under ``/api/`` with a 503, a body too large with a 413."""
        if is_api_path(request) and isinstance(exception, DATABASE_ERRORS):
            return database_unavailable(request, exception)
        if is_api_path(request) and isinstance(exception, RequestDataTooBig):
            return api_error_response(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"the request body is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes",
                ErrorCode.REQUEST_TOO_LARGE,
            )
        return None
