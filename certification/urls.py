"""Calibration and audit pages under /p/<slug>/certification/, release pages under
/p/<slug>/releases/, beside the labelling pages."""

from django.urls import path

from certification import views, views_audit, views_releases

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
]

# Evaluator audits (issue 5).
urlpatterns += [
    path("p/<slug:slug>/certification/audits/", views_audit.audit_list, name="audit-list"),
    path(
        "p/<slug:slug>/certification/audits/<int:evaluator_id>/",
        views_audit.audit_detail,
        name="audit-detail",
    ),
    path(
        "p/<slug:slug>/certification/audits/<int:evaluator_id>/disagreements.csv",
        views_audit.audit_disagreements_csv,
        name="audit-disagreements-csv",
    ),
    path(
        "p/<slug:slug>/certification/audits/<int:evaluator_id>/samples/",
        views_audit.audit_sample_draw_view,
        name="audit-sample-draw",
    ),
]

# Releases: certified label sets (issue 6).
urlpatterns += [
    path("p/<slug:slug>/releases/", views_releases.release_list_view, name="release-list"),
    path(
        "p/<slug:slug>/releases/<int:release_id>/",
        views_releases.release_detail,
        name="release-detail",
    ),
    path(
        "p/<slug:slug>/releases/<int:release_id>/files/<str:name>",
        views_releases.release_file_download,
        name="release-file",
    ),
    path(
        "p/<slug:slug>/releases/<int:release_id>/rebuild/",
        views_releases.release_rebuild_view,
        name="release-rebuild",
    ),
    path(
        "p/<slug:slug>/releases/<int:release_id>/tags/",
        views_releases.release_tag_move_view,
        name="release-tag-move",
    ),
]
