"""HTML pages of the certification side: thin adapters over selectors and services.

Each view resolves the project for the user (a non-member gets 404), checks the role with
``common.certification_project`` (annotators get 404: the pages do not exist for them; writes
are for managers),
calls one selector or service and renders or redirects. Every page needs a login.

Modules: ``calibration`` (specs, their editor, runs with plots), ``audit`` (evaluator audits,
disagreement CSV, audit samples), ``reliability`` (per-person reliability, managers),
``releases`` (freeze, builds, files, tags, rebuilds);
``common`` holds the role check. Release file downloads are streamed by
``certification.downloads``, which the API uses too.
"""

from certification.views.audit import (
    audit_detail,
    audit_disagreements_csv,
    audit_list,
    audit_sample_draw_view,
    audit_target_view,
)
from certification.views.calibration import (
    calibration_home,
    calibration_run_detail,
    calibration_run_start_view,
    calibration_spec_detail,
    calibration_spec_new,
    calibration_spec_revise_view,
)
from certification.views.coverage import coverage_calculator_view
from certification.views.derived import derived_recompute_view
from certification.views.rccs import rccs_report_view
from certification.views.releases import (
    release_detail,
    release_file_download,
    release_list_view,
    release_rebuild_view,
    release_tag_move_view,
)
from certification.views.reliability import reliability_page
from certification.views.run_decisions import (
    calibration_run_decisions_csv,
    calibration_run_decisions_json,
)

__all__ = [
    "calibration_run_decisions_csv",
    "calibration_run_decisions_json",
    "rccs_report_view",
    "coverage_calculator_view",
    "reliability_page",
    "derived_recompute_view",
    "audit_detail",
    "audit_disagreements_csv",
    "audit_list",
    "audit_sample_draw_view",
    "audit_target_view",
    "calibration_home",
    "calibration_run_detail",
    "calibration_run_start_view",
    "calibration_spec_detail",
    "calibration_spec_new",
    "calibration_spec_revise_view",
    "release_detail",
    "release_file_download",
    "release_list_view",
    "release_rebuild_view",
    "release_tag_move_view",
]
