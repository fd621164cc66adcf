"""REST API routes of the certification side, under /api/ beside the labelling routes."""

from django.urls import path

from certification.api import (
    agreement,
    apply,
    audit,
    calibration,
    coverage,
    derived,
    rccs,
    releases,
    reliability,
)

urlpatterns = [
    path(
        "projects/<slug:slug>/agreement/",
        agreement.AgreementReportApi.as_view(),
        name="api-agreement",
    ),
    path(
        "projects/<slug:slug>/reliability/",
        reliability.ReliabilityReportApi.as_view(),
        name="api-reliability",
    ),
    path(
        "projects/<slug:slug>/reliability/recompute/",
        derived.ReliabilityRecomputeApi.as_view(),
        name="api-reliability-recompute",
    ),
    path(
        "projects/<slug:slug>/derived/",
        derived.DerivedFreshnessApi.as_view(),
        name="api-derived-freshness",
    ),
    path(
        "projects/<slug:slug>/agreement/recompute/",
        derived.AgreementRecomputeApi.as_view(),
        name="api-agreement-recompute",
    ),
    path(
        "projects/<slug:slug>/calibration/recompute/",
        derived.CalibrationRecomputeApi.as_view(),
        name="api-calibration-recompute",
    ),
    path(
        "projects/<slug:slug>/audits/recompute/",
        derived.AuditRecomputeApi.as_view(),
        name="api-audit-recompute",
    ),
    path(
        "projects/<slug:slug>/calibration/specs/",
        calibration.CalibrationSpecListApi.as_view(),
        name="api-calibration-spec-list",
    ),
    path(
        "projects/<slug:slug>/calibration/specs/<int:spec_id>/",
        calibration.CalibrationSpecDetailApi.as_view(),
        name="api-calibration-spec-detail",
    ),
    path(
        "projects/<slug:slug>/calibration/specs/<int:spec_id>/revise/",
        calibration.CalibrationSpecReviseApi.as_view(),
        name="api-calibration-spec-revise",
    ),
    path(
        "projects/<slug:slug>/calibration/specs/<int:spec_id>/plan/",
        calibration.CalibrationSpecPlanApi.as_view(),
        name="api-calibration-spec-plan",
    ),
    path(
        "projects/<slug:slug>/calibration/specs/<int:spec_id>/runs/",
        calibration.CalibrationRunListApi.as_view(),
        name="api-calibration-run-list",
    ),
    path(
        "projects/<slug:slug>/calibration/runs/<int:run_id>/",
        calibration.CalibrationRunDetailApi.as_view(),
        name="api-calibration-run-detail",
    ),
    path(
        "projects/<slug:slug>/calibration/runs/<int:run_id>/apply/",
        apply.CalibrationRunApplyApi.as_view(),
        name="api-calibration-run-apply",
    ),
]

# Evaluator audits.
urlpatterns += [
    path(
        "projects/<slug:slug>/audits/<int:evaluator_id>/",
        audit.AuditReportApi.as_view(),
        name="api-audit-detail",
    ),
    path(
        "projects/<slug:slug>/audits/<int:evaluator_id>/samples/",
        audit.AuditSampleListApi.as_view(),
        name="api-audit-sample-list",
    ),
    path(
        "projects/<slug:slug>/audits/<int:evaluator_id>/target/",
        audit.AuditTargetApi.as_view(),
        name="api-audit-target",
    ),
]

# Releases: certified label sets. No PUT, PATCH or DELETE anywhere: releases are
# immutable (405).
urlpatterns += [
    path(
        "projects/<slug:slug>/releases/", releases.ReleaseListApi.as_view(), name="api-release-list"
    ),
    path(
        "projects/<slug:slug>/releases/<int:release_id>/",
        releases.ReleaseDetailApi.as_view(),
        name="api-release-detail",
    ),
    path(
        "projects/<slug:slug>/releases/<int:release_id>/rebuild/",
        releases.ReleaseRebuildApi.as_view(),
        name="api-release-rebuild",
    ),
    path(
        "projects/<slug:slug>/releases/<int:release_id>/files/<str:name>",
        releases.ReleaseFileApi.as_view(),
        name="api-release-file",
    ),
    path(
        "projects/<slug:slug>/release-tags/",
        releases.ReleaseTagListApi.as_view(),
        name="api-release-tag-list",
    ),
    path(
        "coverage-calculator/",
        coverage.CoverageCalculatorApi.as_view(),
        name="api-coverage-calculator",
    ),
    path("projects/<slug:slug>/rccs/", rccs.RCCSReportApi.as_view(), name="api-rccs"),
]
