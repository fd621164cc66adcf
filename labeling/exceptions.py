"""Domain errors of the labelling side; adapters map them to HTTP (labeling/http_errors.py).

An error carries its parts as data: ``reason`` (what is wrong, in words), ``field`` (the input
it is about, e.g. ``claims[2].evidence[0].quote``, or None), ``code`` (stable, machine-readable)
and ``data`` (any further payload). ``message`` (and ``str()``) is built from them:
``"<field>: <reason>"`` when a field is named, else the reason. Adapters place an error by its
``field`` and never parse its message.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    """Every ``code`` an error body of the labelling side or of the API's transport carries.

    Each app lists its codes in one enum (``certification.exceptions.CertificationErrorCode``
    for the other); :func:`error_codes` joins the registered enums, and the API schema states
    them as the ``Error`` body's ``code`` enum, so a client can list them.
    """

    # domain errors (the classes below)
    LABELING_ERROR = "labeling_error"
    NOT_FOUND = "not_found"
    PERMISSION_DENIED = "permission_denied"
    INVALID_INPUT = "invalid_input"
    MULTIPLE_VALUES = "multiple_values"
    INVALID_TRANSITION = "invalid_transition"
    CONFLICT = "conflict"
    LEASE_EXPIRED = "lease_expired"
    STALE_VERSION = "stale_version"
    IMPORT_FAILED = "import_failed"
    POLICY_FROZEN = "policy_frozen"
    # API tokens and logins
    TOKEN_INVALID = "token_invalid"  # noqa: S105
    TOKEN_REVOKED = "token_revoked"  # noqa: S105
    TOKEN_EXPIRED = "token_expired"  # noqa: S105
    TOKEN_SUSPENDED = "token_suspended"  # noqa: S105
    PASSWORD_LOGIN_DISABLED = "password_login_disabled"  # noqa: S105
    AUTHENTICATION_FAILED = "authentication_failed"
    NOT_AUTHENTICATED = "not_authenticated"
    # the transport: statuses Django or DRF answer by themselves
    BAD_REQUEST = "bad_request"
    PARSE_ERROR = "parse_error"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    NOT_ACCEPTABLE = "not_acceptable"
    REQUEST_TOO_LARGE = "request_too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    THROTTLED = "throttled"
    SERVER_ERROR = "server_error"
    SERVICE_UNAVAILABLE = "service_unavailable"
    ERROR = "error"
    # a background job's failure (its ``error``)
    WORKER_LOST = "worker_lost"
    INTERNAL_ERROR = "internal_error"


_code_enums: list[type[StrEnum]] = [ErrorCode]


def error_codes_register(codes: type[StrEnum]) -> None:
    """Add another app's enum of error codes to :func:`error_codes` (once; from its ``ready``)."""
    if codes not in _code_enums:
        _code_enums.append(codes)


def error_codes() -> list[str]:
    """Every registered error code, sorted."""
    return sorted({str(code) for codes in _code_enums for code in codes})


class LabelingError(Exception):
    """Base domain error: ``reason``, ``field``, ``code`` and ``data``; ``message`` from them.

    Args:
        reason: What is wrong, in words.
        field: The input the error is about (None: the operation as a whole).
        code: A stable code; defaults to the class's ``code``.
        data: Further payload (e.g. the versions of a stale object); never the field.
        prefix: Begin ``message`` with ``"<field>: "`` (False when the reason reads on its own,
            e.g. "release 3 already exists" about the field ``version``).
    """

    code: StrEnum = ErrorCode.LABELING_ERROR

    def __init__(
        self,
        reason: str,
        *,
        field: str | None = None,
        code: StrEnum | None = None,
        data: dict[str, Any] | None = None,
        prefix: bool = True,
    ) -> None:
        self.reason = reason
        self.field = field
        if code is not None:
            self.code = code
        self.data: dict[str, Any] = dict(data or {})
        self.message = f"{field}: {reason}" if field and prefix else reason
        super().__init__(self.message)

    def body(self) -> dict[str, Any]:
        """Return the error as the one JSON error body of the API (and of a failed job).

        ``{"detail", "code", "errors": [{"field", "reason", ...}], "field"?, **data}``: the
        ``errors`` items are ``data["errors"]`` when the error carries records (an import's,
        each with its ``location``), else one item of ``field`` and ``reason``.
        """
        data = dict(self.data)
        records = data.pop("errors", None)
        if isinstance(records, list) and records:
            errors: list[dict[str, Any]] = [dict(r) for r in records]
        else:
            errors = [{"field": self.field, "reason": self.reason}]
        field = {"field": self.field} if self.field else {}
        return {"detail": self.message, "code": self.code, "errors": errors, **field, **data}


class NotFound(LabelingError):
    """The object does not exist or is not visible to the actor."""

    code: StrEnum = ErrorCode.NOT_FOUND


class PermissionDenied(LabelingError):
    """The actor's role does not allow the operation."""

    code: StrEnum = ErrorCode.PERMISSION_DENIED


class InvalidInput(LabelingError):
    """Input is malformed or violates a rule of the data model."""

    code: StrEnum = ErrorCode.INVALID_INPUT


class MultipleValues(InvalidInput):
    """A field that takes one value was given several (a form field or JSON key repeated)."""

    code: StrEnum = ErrorCode.MULTIPLE_VALUES

    @classmethod
    def of(cls, field: str, count: int | None = None) -> MultipleValues:
        """Return the refusal of ``field`` given ``count`` values (None: not counted).

        ``field`` is named as the services name inputs, e.g. ``claims[1].label``.
        """
        times = f"{count} values" if count else "several values"
        return cls(f"{times} given; this field takes exactly one", field=field)


class InvalidTransition(LabelingError):
    """The object's state does not allow the operation (e.g. the partition is already frozen)."""

    code: StrEnum = ErrorCode.INVALID_TRANSITION


class Conflict(LabelingError):
    """The operation lost a race or acts on a stale view of the object (HTTP 409)."""

    code: StrEnum = ErrorCode.CONFLICT


class LeaseExpired(Conflict):
    """A submit arrived after the assignment's lease expired and its slot was given back."""

    code: StrEnum = ErrorCode.LEASE_EXPIRED


class StaleVersion(Conflict):
    """The object changed since the actor loaded it (optimistic locking); reload and retry."""

    code: StrEnum = ErrorCode.STALE_VERSION


class WorkloadImportFailed(InvalidInput):
    """An import was refused; nothing was written. ``errors`` lists (location, field, reason)."""

    code: StrEnum = ErrorCode.IMPORT_FAILED

    def __init__(self, errors: list[Any]) -> None:
        lines = [str(e) for e in errors]
        super().__init__(
            f"import refused, nothing was written ({len(errors)} error(s)): "
            + "; ".join(lines[:3]),
            data={
                "errors": [
                    {"location": e.location, "field": e.field, "reason": e.reason} for e in errors
                ]
            },
        )
        self.errors = errors
