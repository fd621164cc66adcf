"""Domain errors as REST API responses, with the status of ``labeling/http_errors.py``."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.serializers import as_serializer_error
from rest_framework.views import exception_handler as drf_exception_handler

from labeling import exceptions as domain
from labeling.http_errors import http_status


class DomainAPIException(exceptions.APIException):
    """A domain error converted for DRF, keeping its code, field and data."""

    def __init__(self, error: domain.LabelingError, status_code: int) -> None:
        super().__init__(detail=error.message, code=error.code)
        self.status_code = status_code
        self.field = error.field
        self.data = error.data


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Convert domain and Django validation errors, then defer to DRF's handler.

    Bodies are ``{"detail": ..., "code": ...}``, then ``"field"`` when the error names the
    input it is about, then the error's ``data`` (e.g. import errors).
    """
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(as_serializer_error(exc))
    elif isinstance(exc, domain.LabelingError):
        exc = DomainAPIException(exc, http_status(exc))
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, DomainAPIException):
        field = {"field": exc.field} if exc.field else {}
        response.data = {"detail": str(exc.detail), "code": exc.get_codes(), **field, **exc.data}
    return response
