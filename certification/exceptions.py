"""Domain errors of certification, mirroring ``labeling/exceptions.py``.

Each subclasses the labelling error of the same HTTP meaning, so the one mapping table in
``labeling/http_errors.py`` (not found 404, forbidden 403, bad transition 409, bad input 400)
covers them, for the API and the pages, without ``labeling`` importing ``certification``. Like
every domain error they carry ``reason``, ``field``, ``code`` and ``data``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from labeling.exceptions import InvalidInput, InvalidTransition, LabelingError, NotFound


class CertificationErrorCode(StrEnum):
    """Every ``code`` of a certification error (registered with ``labeling.exceptions``)."""

    CERTIFICATION_ERROR = "certification_error"
    SPEC_NOT_FOUND = "spec_not_found"
    RUN_NOT_FOUND = "run_not_found"
    INVALID_SPEC = "invalid_spec"
    SPEC_FROZEN = "spec_frozen"
    PLAN_UNAVAILABLE = "plan_unavailable"
    EVALUATOR_NOT_FOUND = "evaluator_not_found"
    AUDIT_NOT_CONFIGURED = "audit_not_configured"
    INVALID_AUDIT = "invalid_audit"
    RELEASE_NOT_FOUND = "release_not_found"
    RELEASE_FILE_NOT_FOUND = "release_file_not_found"
    RUN_NOT_APPLICABLE = "run_not_applicable"
    RCCS_NOT_AVAILABLE = "rccs_not_available"


class CertificationError(LabelingError):
    """Base of the certification errors, with a stable ``code`` and an optional ``data``."""

    code = CertificationErrorCode.CERTIFICATION_ERROR


class SpecNotFound(NotFound):
    """No calibration spec with this id in the project (or the project is not visible)."""

    code = CertificationErrorCode.SPEC_NOT_FOUND


class RunNotFound(NotFound):
    """No calibration run with this id in the project."""

    code = CertificationErrorCode.RUN_NOT_FOUND


class InvalidSpec(InvalidInput):
    """A calibration spec field is invalid; ``field`` names it (always given)."""

    code = CertificationErrorCode.INVALID_SPEC

    def __init__(self, field: str, reason: str, *, data: dict[str, Any] | None = None) -> None:
        super().__init__(reason, field=field, data=data)


class SpecFrozen(InvalidTransition):
    """The spec is used by a run (or already has a newer version) and cannot change in place."""

    code = CertificationErrorCode.SPEC_FROZEN


class PlanUnavailable(InvalidTransition):
    """The spec's current labels cannot be planned (a statistics error on its inputs)."""

    code = CertificationErrorCode.PLAN_UNAVAILABLE


class EvaluatorNotFound(NotFound):
    """No evaluator with this id (or name@version) in the project."""

    code = CertificationErrorCode.EVALUATOR_NOT_FOUND


class AuditNotConfigured(NotFound):
    """The evaluator has no audit declaration yet (a manager declares its polarity first)."""

    code = CertificationErrorCode.AUDIT_NOT_CONFIGURED


class InvalidAudit(InvalidInput):
    """An audit declaration (or audit sample) field is invalid; ``field`` names it."""

    code = CertificationErrorCode.INVALID_AUDIT

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason, field=field)


class ReleaseNotFound(NotFound):
    """No release with this id in the project."""

    code = CertificationErrorCode.RELEASE_NOT_FOUND


class ReleaseFileNotFound(NotFound):
    """The release has no finished build, or its build lists no file of that name."""

    code = CertificationErrorCode.RELEASE_FILE_NOT_FOUND


class RunNotApplicable(InvalidTransition):
    """A calibration run's certificate cannot be applied (``reason`` says why).

    The run is not done, was computed by another statistics version, or certifies no
    operating point.
    """

    code = CertificationErrorCode.RUN_NOT_APPLICABLE


class RCCSNotAvailable(NotFound):
    """The project holds no candidate answer with both a retrieval score and a confidence."""

    code = CertificationErrorCode.RCCS_NOT_AVAILABLE
