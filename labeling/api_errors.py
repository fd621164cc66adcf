"""One mapping from domain errors to HTTP for the REST API."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.serializers import as_serializer_error
from rest_framework.views import exception_handler as drf_exception_handler

from labeling import exceptions as domain

STATUS_BY_ERROR: list[tuple[type[domain.LabelingError], int]] = [
    (domain.NotFound, status.HTTP_404_NOT_FOUND),
    (domain.PermissionDenied, status.HTTP_403_FORBIDDEN),
    (domain.InvalidTransition, status.HTTP_409_CONFLICT),
    (domain.Conflict, status.HTTP_409_CONFLICT),
    (domain.InvalidInput, status.HTTP_400_BAD_REQUEST),
]


class DomainAPIException(exceptions.APIException):
    """A domain error converted for DRF, keeping its code and data."""

    def __init__(self, error: domain.LabelingError, status_code: int) -> None:
        super().__init__(detail=error.message, code=error.code)
        self.status_code = status_code
        self.data = error.data


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Convert domain and Django validation errors, then defer to DRF's handler.

    Bodies are ``{"detail": ..., "code": ...}`` plus the error's ``data`` (e.g. import errors).
    """
    data: dict[str, Any] = {}
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(as_serializer_error(exc))
    elif isinstance(exc, domain.LabelingError):
        code = next(
            (s for cls, s in STATUS_BY_ERROR if isinstance(exc, cls)), status.HTTP_400_BAD_REQUEST
        )
        data = exc.data
        exc = DomainAPIException(exc, code)
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, DomainAPIException):
        response.data = {"detail": str(exc.detail), "code": exc.get_codes(), **data}
    return response
