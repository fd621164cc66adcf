"""Routes of the certification pages, beside the labelling pages.

Calibration, audit and reliability pages are under /p/<slug>/certification/, release pages under
/p/<slug>/releases/.
"""

from django.urls import path

from certification import views

urlpatterns = [
    path(
        "p/<slug:slug>/certification/",
        views.calibration_home,
        name="calibration-home",
    ),
    path(
        "p/<slug:slug>/certification/specs/new/",
        views.calibration_spec_new,
        name="calibration-spec-new",
    ),
    path(
        "p/<slug:slug>/certification/specs/<int:spec_id>/",
        views.calibration_spec_detail,
        name="calibration-spec-detail",
    ),
    path(
        "p/<slug:slug>/certification/specs/<int:spec_id>/revise/",
        views.calibration_spec_revise_view,
        name="calibration-spec-revise",
    ),
    path(
        "p/<slug:slug>/certification/specs/<int:spec_id>/run/",
        views.calibration_run_start_view,
        name="calibration-run-start",
    ),
    path(
        "p/<slug:slug>/certification/runs/<int:run_id>/",
        views.calibration_run_detail,
        name="calibration-run-detail",
    ),
    path(
        "p/<slug:slug>/certification/runs/<int:run_id>/test-decisions.csv",
        views.calibration_run_decisions_csv,
        name="calibration-run-decisions-csv",
    ),
    path(
        "p/<slug:slug>/certification/runs/<int:run_id>/test-decisions.json",
        views.calibration_run_decisions_json,
        name="calibration-run-decisions-json",
    ),
]

# Evaluator audits.
urlpatterns += [
    path("p/<slug:slug>/certification/audits/", views.audit_list, name="audit-list"),
    path(
        "p/<slug:slug>/certification/audits/<int:evaluator_id>/",
        views.audit_detail,
        name="audit-detail",
    ),
    path(
        "p/<slug:slug>/certification/audits/<int:evaluator_id>/disagreements.csv",
        views.audit_disagreements_csv,
        name="audit-disagreements-csv",
    ),
    path(
        "p/<slug:slug>/certification/audits/<int:evaluator_id>/samples/",
        views.audit_sample_draw_view,
        name="audit-sample-draw",
    ),
    path(
        "p/<slug:slug>/certification/audits/<int:evaluator_id>/target/",
        views.audit_target_view,
        name="audit-target",
    ),
]

# Releases: certified label sets.
urlpatterns += [
    path("p/<slug:slug>/releases/", views.release_list_view, name="release-list"),
    path(
        "p/<slug:slug>/releases/<int:release_id>/",
        views.release_detail,
        name="release-detail",
    ),
    path(
        "p/<slug:slug>/releases/<int:release_id>/files/<str:name>",
        views.release_file_download,
        name="release-file",
    ),
    path(
        "p/<slug:slug>/releases/<int:release_id>/rebuild/",
        views.release_rebuild_view,
        name="release-rebuild",
    ),
    path(
        "p/<slug:slug>/releases/<int:release_id>/tags/",
        views.release_tag_move_view,
        name="release-tag-move",
    ),
]

# Per-person reliability (managers only).
urlpatterns += [
    path("p/<slug:slug>/certification/reliability/", views.reliability_page, name="reliability"),
]

# A manager's request to recompute a derived result (a button on the dashboard, calibration
# and audit pages).
urlpatterns += [
    path(
        "p/<slug:slug>/certification/agreement/recompute/",
        views.derived_recompute_view,
        {"kind": "agreement"},
        name="agreement-recompute",
    ),
    path(
        "p/<slug:slug>/certification/calibration/recompute/",
        views.derived_recompute_view,
        {"kind": "calibration"},
        name="calibration-recompute",
    ),
    path(
        "p/<slug:slug>/certification/audits/recompute/",
        views.derived_recompute_view,
        {"kind": "audit"},
        name="audit-recompute",
    ),
    path(
        "p/<slug:slug>/certification/reliability/recompute/",
        views.derived_recompute_view,
        {"kind": "reliability"},
        name="reliability-recompute",
    ),
]

# The coverage calculator (no project data: every signed-in user).
urlpatterns += [
    path(
        "certification/coverage-calculator/",
        views.coverage_calculator_view,
        name="coverage-calculator",
    ),
]

# RCCS as a report of its own (computed on request).
urlpatterns += [
    path("p/<slug:slug>/certification/rccs/", views.rccs_report_view, name="rccs-report"),
]
