"""Services of certification (STYLE.md C3): each recomputes from resolved labels, idempotently."""

from certification.certificates import STATS_VERSION, calibration_result_compute
from certification.services.agreement import agreement_recompute, level_to_json, votes_sha256
from certification.services.audit import (
    AUDIT_STATS_VERSION,
    audit_report_configure,
    audit_report_recompute,
    audit_reports_refresh,
    audit_result_compute,
    evaluator_verdict,
)
from certification.services.audit_sample import allocate, audit_sample_draw
from certification.services.calibration import (
    SPEC_FIELDS,
    calibration_run_execute,
    calibration_run_fail,
    calibration_run_rebuild,
    calibration_run_request,
    calibration_run_start,
    calibration_runs_refresh,
    calibration_spec_create,
    calibration_spec_revise,
    calibration_spec_update,
    inputs_sha256,
    spec_clean,
    spec_content,
    spec_sha256,
)
from certification.services.calibration_apply import (
    calibration_run_apply,
    calibration_run_certificate,
)
from certification.services.derived import (
    derived_recompute,
    derived_recompute_request,
    derived_schedule,
)
from certification.services.reliability import reliability_recompute

__all__ = [
    "derived_recompute",
    "derived_recompute_request",
    "derived_schedule",
    "AUDIT_STATS_VERSION",
    "allocate",
    "audit_report_configure",
    "audit_sample_draw",
    "audit_report_recompute",
    "audit_reports_refresh",
    "audit_result_compute",
    "evaluator_verdict",
    "SPEC_FIELDS",
    "STATS_VERSION",
    "agreement_recompute",
    "calibration_result_compute",
    "calibration_run_apply",
    "calibration_run_certificate",
    "calibration_run_execute",
    "calibration_run_fail",
    "calibration_run_rebuild",
    "calibration_run_request",
    "calibration_run_start",
    "calibration_runs_refresh",
    "calibration_spec_create",
    "calibration_spec_revise",
    "calibration_spec_update",
    "inputs_sha256",
    "level_to_json",
    "reliability_recompute",
    "spec_clean",
    "spec_content",
    "spec_sha256",
    "votes_sha256",
]
