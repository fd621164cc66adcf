"""Django admin for certification: stored results are view-only (services write them)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from certification.models import (
    AgreementReport,
    AppliedScore,
    AuditReport,
    AuditSample,
    AuditSampleMember,
    CalibrationInput,
    CalibrationRun,
    CalibrationSpec,
    DerivedResultState,
    DriftWatch,
    Release,
    ReleaseBuild,
    ReleaseTag,
    ReleaseTagMove,
    ReliabilityReport,
)


@admin.register(AgreementReport)
class AgreementReportAdmin(admin.ModelAdmin):
    """A project's agreement report, read-only: ``agreement_recompute`` is its only writer."""

    list_display = ("project", "computed_at", "input_sha256")
    list_select_related = ("project",)
    search_fields = ("project__slug", "input_sha256")
    readonly_fields = ("project", "computed_at", "input_sha256", "answer", "claim")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ReliabilityReport)
class ReliabilityReportAdmin(admin.ModelAdmin):
    """A project's reliability report, read-only: ``reliability_recompute`` is its only writer."""

    list_display = ("project", "computed_at", "policy_version", "input_sha256")
    list_select_related = ("project",)
    search_fields = ("project__slug", "input_sha256")
    readonly_fields = ("project", "computed_at", "policy_version", "input_sha256", "result")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class _ReadOnlyAdmin(admin.ModelAdmin):
    """View-only: the calibration services are the only writers (specs freeze once used)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(CalibrationSpec)
class CalibrationSpecAdmin(_ReadOnlyAdmin):
    """Calibration specs, read-only (``calibration_spec_create`` / ``_revise`` write them)."""

    list_display = ("name", "version", "project", "method", "alpha", "delta", "content_sha256")
    list_filter = ("method",)
    list_select_related = ("project",)
    search_fields = ("project__slug", "name", "content_sha256")


@admin.register(CalibrationRun)
class CalibrationRunAdmin(_ReadOnlyAdmin):
    """Calibration runs, read-only (the run services and the Celery task write them)."""

    list_display = ("pk", "spec", "project", "status", "trigger", "created_at", "outcome")
    list_filter = ("status", "trigger")
    list_select_related = ("spec", "project")
    search_fields = ("project__slug", "input_sha256", "spec__name")
    exclude = ("input",)


@admin.register(CalibrationInput)
class CalibrationInputAdmin(_ReadOnlyAdmin):
    """Distinct input snapshots of calibration runs, read-only (the run request stores them)."""

    list_display = ("pk", "sha256", "created_at")
    search_fields = ("sha256",)
    exclude = ("snapshot",)


@admin.register(AuditReport)
class AuditReportAdmin(_ReadOnlyAdmin):
    """Evaluator audits, read-only (``audit_report_configure`` / ``_recompute`` write them)."""

    list_display = ("evaluator", "project", "computed_at", "input_sha256")
    list_select_related = ("evaluator", "project")
    search_fields = ("project__slug", "evaluator__name", "input_sha256")
    exclude = ("result",)


@admin.register(AuditSample)
class AuditSampleAdmin(_ReadOnlyAdmin):
    """Audit samples, read-only (``audit_sample_draw`` writes them)."""

    list_display = ("pk", "evaluator", "project", "size", "seed", "created_at")
    list_select_related = ("evaluator", "project")
    search_fields = ("project__slug", "evaluator__name")
    exclude = ("population",)


@admin.register(AuditSampleMember)
class AuditSampleMemberAdmin(_ReadOnlyAdmin):
    """Members of audit samples, read-only."""

    list_display = ("sample", "item", "stratum", "inclusion_probability")
    list_select_related = ("sample",)


@admin.register(DriftWatch)
class DriftWatchAdmin(_ReadOnlyAdmin):
    """Drift watches of applied certificates, read-only (the apply API and its fold write them)."""

    list_display = ("run", "recorded", "folded", "log_martingale", "crossed_seq", "heartbeat_at")
    list_select_related = ("run",)
    exclude = ("bag",)


@admin.register(AppliedScore)
class AppliedScoreAdmin(_ReadOnlyAdmin):
    """Scores the apply API saw, one row per request (no texts), read-only and append-only."""

    list_display = ("run", "seq", "created_at")
    list_select_related = ("run",)


# Releases: immutable. The database refuses any UPDATE of a release row; here no
# release, build, tag or tag move can be added, changed or deleted (the services write them).


@admin.register(Release)
class ReleaseAdmin(_ReadOnlyAdmin):
    """Releases, read-only: a correction is a new release whose parent is the one it corrects."""

    list_display = ("version", "project", "parent", "policy", "created_by", "created_at")
    list_select_related = ("project", "parent", "policy", "created_by")
    search_fields = ("project__slug", "version", "notes")
    exclude = ("report",)  # the figures as frozen: large; the release page shows them


@admin.register(ReleaseBuild)
class ReleaseBuildAdmin(_ReadOnlyAdmin):
    """Release builds, read-only (``release_build_execute`` writes them)."""

    list_display = ("pk", "release", "is_rebuild", "status", "matches", "created_at")
    list_filter = ("status", "is_rebuild")
    list_select_related = ("release", "release__project")
    search_fields = ("release__project__slug", "release__version", "manifest_sha256")


@admin.register(ReleaseTag)
class ReleaseTagAdmin(_ReadOnlyAdmin):
    """Release tags, read-only (``release_tag_move`` moves them and keeps every move)."""

    list_display = ("name", "project", "release", "moved_by", "moved_at")
    list_select_related = ("project", "release", "moved_by")
    search_fields = ("project__slug", "name")


@admin.register(ReleaseTagMove)
class ReleaseTagMoveAdmin(_ReadOnlyAdmin):
    """The history of release tags, read-only."""

    list_display = ("tag", "previous", "release", "moved_by", "moved_at")
    list_select_related = ("tag", "previous", "release", "moved_by")


@admin.register(DerivedResultState)
class DerivedResultStateAdmin(_ReadOnlyAdmin):
    """Where each (project, kind) recomputation stands: changed only by the tasks."""

    list_display = ["project", "kind", "covered_generation", "computed_at", "enqueued_at"]
    list_filter = ["kind"]
    search_fields = ["project__slug"]
