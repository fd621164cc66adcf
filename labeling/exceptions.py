"""Domain errors of the labelling side; adapters map them to HTTP (labeling/http_errors.py).

An error carries its parts as data: ``reason`` (what is wrong, in words), ``field`` (the input
it is about, e.g. ``claims[2].evidence[0].quote``, or None), ``code`` (stable, machine-readable)
and ``data`` (any further payload). ``message`` (and ``str()``) is built from them:
``"<field>: <reason>"`` when a field is named, else the reason. Adapters place an error by its
``field`` and never parse its message.
"""

from __future__ import annotations

from typing import Any


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

    code = "labeling_error"

    def __init__(
        self,
        reason: str,
        *,
        field: str | None = None,
        code: str | None = None,
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

    code = "not_found"


class PermissionDenied(LabelingError):
    """The actor's role does not allow the operation."""

    code = "permission_denied"


class InvalidInput(LabelingError):
    """Input is malformed or violates a rule of the data model."""

    code = "invalid_input"


class MultipleValues(InvalidInput):
    """A field that takes one value was given several (a form field or JSON key repeated)."""

    code = "multiple_values"

    @classmethod
    def of(cls, field: str, count: int | None = None) -> MultipleValues:
        """Return the refusal of ``field`` given ``count`` values (None: not counted).

        ``field`` is named as the services name inputs, e.g. ``claims[1].label``.
        """
        times = f"{count} values" if count else "several values"
        return cls(f"{times} given; this field takes exactly one", field=field)


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
