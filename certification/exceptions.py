"""Domain errors of certification, mirroring ``labeling/exceptions.py``.

Each subclasses the labelling error of the same HTTP meaning, so the one mapping table in
``labeling/http_errors.py`` (not found 404, forbidden 403, bad transition 409, bad input 400)
covers them, for the API and the pages, without ``labeling`` importing ``certification``. Like
every domain error they carry ``reason``, ``field``, ``code`` and ``data``.
"""

from __future__ import annotations

from typing import Any

from labeling.exceptions import InvalidInput, InvalidTransition, LabelingError, NotFound


class CertificationError(LabelingError):
    """Base of the certification errors, with a stable ``code`` and an optional ``data``."""

    code = "certification_error"


class SpecNotFound(NotFound):
    """No calibration spec with this id in the project (or the project is not visible)."""

    code = "spec_not_found"


class RunNotFound(NotFound):
    """No calibration run with this id in the project."""

    code = "run_not_found"


class InvalidSpec(InvalidInput):
    """A calibration spec field is invalid; ``field`` names it (always given)."""

    code = "invalid_spec"

    def __init__(self, field: str, reason: str, *, data: dict[str, Any] | None = None) -> None:
        super().__init__(reason, field=field, data=data)


class SpecFrozen(InvalidTransition):
    """The spec is used by a run (or already has a newer version) and cannot change in place."""

    code = "spec_frozen"


class PlanUnavailable(InvalidTransition):
    """The spec's current labels cannot be planned (a statistics error on its inputs)."""

    code = "plan_unavailable"


class EvaluatorNotFound(NotFound):
    """No evaluator with this id (or name@version) in the project."""

    code = "evaluator_not_found"


class AuditNotConfigured(NotFound):
    """The evaluator has no audit declaration yet (a manager declares its polarity first)."""

    code = "audit_not_configured"


class InvalidAudit(InvalidInput):
    """An audit declaration (or audit sample) field is invalid; ``field`` names it."""

    code = "invalid_audit"

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason, field=field)


class ReleaseNotFound(NotFound):
    """No release with this id in the project."""

    code = "release_not_found"


class ReleaseFileNotFound(NotFound):
    """The release has no finished build, or its build lists no file of that name."""

    code = "release_file_not_found"


class RunNotApplicable(InvalidTransition):
    """A calibration run's certificate cannot be applied (``reason`` says why).

    The run is not done, was computed by another statistics version, or certifies no
    operating point.
    """

    code = "run_not_applicable"


class RCCSNotAvailable(NotFound):
    """The project holds no candidate answer with both a retrieval score and a confidence."""

    code = "rccs_not_available"
