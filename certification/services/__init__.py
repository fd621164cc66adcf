"""Services of certification (STYLE.md C3): each recomputes from resolved labels, idempotently.

The names below are loaded on first use (PEP 562), not with the package: a web process that
imports one service (``certification.services.calibration`` for its pages) must not load NumPy
and SciPy through the services that import the statistics at their top
(``certification.services.agreement``, ``reliability``; ``tests/test_light_web.py``).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from certification.certificates import STATS_VERSION, calibration_result_compute
    from certification.contract import SPEC_FIELDS, inputs_sha256, spec_content, spec_sha256
    from certification.services.agreement import (
        agreement_recompute,
        level_to_json,
        votes_sha256,
    )
    from certification.services.audit import (
        audit_report_configure,
        audit_report_recompute,
        audit_reports_refresh,
    )
    from certification.services.audit_compute import AUDIT_STATS_VERSION, audit_result_compute
    from certification.services.audit_design import evaluator_verdict
    from certification.services.audit_sample import allocate, audit_sample_draw
    from certification.services.calibration import (
        calibration_run_execute,
        calibration_run_fail,
        calibration_run_rebuild,
        calibration_run_request,
        calibration_run_start,
        calibration_runs_refresh,
    )
    from certification.services.calibration_apply import (
        calibration_run_apply,
        calibration_run_certificate,
    )
    from certification.services.calibration_specs import (
        calibration_spec_create,
        calibration_spec_revise,
        calibration_spec_update,
        spec_clean,
    )
    from certification.services.derived import (
        derived_recompute,
        derived_recompute_request,
        derived_schedule,
    )
    from certification.services.reliability import reliability_recompute

#: Where each exported name lives.
_EXPORTS = {
    "STATS_VERSION": "certification.certificates",
    "calibration_result_compute": "certification.certificates",
    **dict.fromkeys(
        ("agreement_recompute", "level_to_json", "votes_sha256"), "certification.services.agreement"
    ),
    **dict.fromkeys(
        ("audit_report_configure", "audit_report_recompute", "audit_reports_refresh"),
        "certification.services.audit",
    ),
    **dict.fromkeys(
        ("AUDIT_STATS_VERSION", "audit_result_compute"), "certification.services.audit_compute"
    ),
    "evaluator_verdict": "certification.services.audit_design",
    **dict.fromkeys(("allocate", "audit_sample_draw"), "certification.services.audit_sample"),
    **dict.fromkeys(
        ("SPEC_FIELDS", "inputs_sha256", "spec_content", "spec_sha256"), "certification.contract"
    ),
    **dict.fromkeys(
        (
            "calibration_run_execute",
            "calibration_run_fail",
            "calibration_run_rebuild",
            "calibration_run_request",
            "calibration_run_start",
            "calibration_runs_refresh",
        ),
        "certification.services.calibration",
    ),
    **dict.fromkeys(
        (
            "calibration_spec_create",
            "calibration_spec_revise",
            "calibration_spec_update",
            "spec_clean",
        ),
        "certification.services.calibration_specs",
    ),
    **dict.fromkeys(
        ("calibration_run_apply", "calibration_run_certificate"),
        "certification.services.calibration_apply",
    ),
    **dict.fromkeys(
        ("derived_recompute", "derived_recompute_request", "derived_schedule"),
        "certification.services.derived",
    ),
    "reliability_recompute": "certification.services.reliability",
}


def __getattr__(name: str) -> Any:
    """Load an exported name from its module (``from certification.services import x``)."""
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


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
