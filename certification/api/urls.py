"""REST API routes of the certification side, under /api/ beside the labelling routes."""

from django.urls import path

from certification.api import views

urlpatterns = [
    path(
        "projects/<slug:slug>/agreement/",
        views.AgreementReportApi.as_view(),
        name="api-agreement",
    ),
    path(
        "projects/<slug:slug>/calibration/specs/",
        views.CalibrationSpecListApi.as_view(),
        name="api-calibration-spec-list",
    ),
    path(
        "projects/<slug:slug>/calibration/specs/<int:spec_id>/",
        views.CalibrationSpecDetailApi.as_view(),
        name="api-calibration-spec-detail",
    ),
    path(
        "projects/<slug:slug>/calibration/specs/<int:spec_id>/revise/",
        views.CalibrationSpecReviseApi.as_view(),
        name="api-calibration-spec-revise",
    ),
    path(
        "projects/<slug:slug>/calibration/specs/<int:spec_id>/runs/",
        views.CalibrationRunListApi.as_view(),
        name="api-calibration-run-list",
    ),
    path(
        "projects/<slug:slug>/calibration/runs/<int:run_id>/",
        views.CalibrationRunDetailApi.as_view(),
        name="api-calibration-run-detail",
    ),
]

# Evaluator audits (issue 5).
urlpatterns += [
    path(
        "projects/<slug:slug>/audits/<int:evaluator_id>/",
        views.AuditReportApi.as_view(),
        name="api-audit-detail",
    ),
    path(
        "projects/<slug:slug>/audits/<int:evaluator_id>/samples/",
        views.AuditSampleListApi.as_view(),
        name="api-audit-sample-list",
    ),
]
