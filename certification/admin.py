"""Django admin for certification: stored results are view-only (services write them)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from certification.models import AgreementReport


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
