"""Domain errors of the labelling side; adapters map them to HTTP (labeling/api_errors.py)."""

from __future__ import annotations

from typing import Any


class LabelingError(Exception):
    """Base domain error with a stable ``code`` and an optional ``data`` payload."""

    code = "labeling_error"

    def __init__(self, message: str, *, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data or {}


class NotFound(LabelingError):
    """The object does not exist or is not visible to the actor."""

    code = "not_found"


class PermissionDenied(LabelingError):
    """The actor's role does not allow the operation."""

    code = "permission_denied"


class InvalidInput(LabelingError):
    """Input is malformed or violates a rule of the data model."""

    code = "invalid_input"


class InvalidTransition(LabelingError):
    """The object's state does not allow the operation (e.g. the partition is already frozen)."""

    code = "invalid_transition"


class Conflict(LabelingError):
    """The operation lost a race or acts on a stale view of the object (HTTP 409)."""

    code = "conflict"


class LeaseExpired(Conflict):
    """A submit arrived after the assignment's lease expired and its slot was given back."""

    code = "lease_expired"


class StaleVersion(Conflict):
    """The object changed since the actor loaded it (optimistic locking); reload and retry."""

    code = "stale_version"


class WorkloadImportFailed(InvalidInput):
    """An import was refused; nothing was written. ``errors`` lists (location, field, reason)."""

    code = "import_failed"

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
