"""Data model of certlabel's certification side.

``agreement`` holds a project's inter-annotator agreement report; ``calibration`` the calibration
specs (the frozen evaluation contract) and their runs; ``audit`` evaluator audits and their
samples; ``reliability`` the per-person reliability report; ``drift`` the
scores applied certificates saw and their drift watch; ``releases`` the frozen certified
label sets, their builds and tags. Invariants live in the database as constraints (and a trigger
that refuses any update of a release).
"""

from certification.models.agreement import (
    AgreementReport,
)
from certification.models.audit import (
    AuditReport,
    AuditSample,
    AuditSampleMember,
    FlagWhen,
    SampleKind,
)
from certification.models.calibration import (
    LIVE_RUN_STATUSES,
    Acceptance,
    AnswerField,
    CalibrationInput,
    CalibrationMethod,
    CalibrationPartition,
    CalibrationRun,
    CalibrationSpec,
    CountAs,
    Denominator,
    Loss,
    Multiplicity,
    RunStatus,
    RunTrigger,
    Selector,
    TieRule,
    Utility,
)
from certification.models.derived import DerivedResultState
from certification.models.drift import AppliedScore, DriftWatch
from certification.models.releases import (
    RELEASE_VERSION_PATTERN,
    BuildStatus,
    Release,
    ReleaseBuild,
    ReleaseTag,
    ReleaseTagMove,
    release_version_key,
)
from certification.models.reliability import ReliabilityReport

__all__ = [
    "DerivedResultState",
    "Acceptance",
    "AgreementReport",
    "AppliedScore",
    "AnswerField",
    "AuditReport",
    "AuditSample",
    "AuditSampleMember",
    "BuildStatus",
    "CalibrationMethod",
    "CalibrationInput",
    "CalibrationPartition",
    "CalibrationRun",
    "CalibrationSpec",
    "CountAs",
    "Denominator",
    "DriftWatch",
    "FlagWhen",
    "SampleKind",
    "LIVE_RUN_STATUSES",
    "Loss",
    "Multiplicity",
    "RELEASE_VERSION_PATTERN",
    "ReliabilityReport",
    "Release",
    "ReleaseBuild",
    "ReleaseTag",
    "ReleaseTagMove",
    "RunStatus",
    "RunTrigger",
    "Selector",
    "TieRule",
    "Utility",
    "release_version_key",
]
