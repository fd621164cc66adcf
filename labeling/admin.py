"""Django admin of projects, policies, members, accounts and background work.

Projects are created through ``project_create`` so they get label policy v1; the partition is
frozen through ``partition_freeze``, never by editing fields. Memberships are added, changed and
deleted through the membership services, so the admin keeps a project's last active manager like
every other way in; invitations are view-only (they change by being accepted, declined or
revoked). Imported data and labelling work are view-only (:mod:`labeling.admin_records`).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.http import HttpRequest

# Importing the base classes registers the view-only admin of every imported record and of the
# labelling work (labeling.admin_records).
from labeling.admin_records import ReadOnlyAdmin, ReadOnlyInline
from labeling.models import (
    ApiToken,
    Invitation,
    Job,
    LabelPolicy,
    Membership,
    PeriodicRun,
    Project,
    SsoIdentity,
)
from labeling.services import membership_set, project_create
from labeling.services.members import (
    membership_change,
    membership_deactivate,
    membership_reactivate,
    membership_refusal,
    membership_remove,
    projects_kept_by,
)

# ---------------------------------------------------------------------------------------------
# Projects, policies, members
# ---------------------------------------------------------------------------------------------


class MembershipInline(ReadOnlyInline):
    """The project's members, view-only: they change on the membership pages (the services)."""

    model = Membership
    fields = readonly_fields = ("user", "role", "is_active", "created_at")


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "overlap", "partition_frozen_at", "created_at"]
    search_fields = ["slug", "name"]
    list_filter = [("partition_frozen_at", admin.EmptyFieldListFilter)]
    inlines = [MembershipInline]
    partition_fields = ["partition_seed", "partition_proportions", "partition_frozen_at"]
    # Set on the project's settings page through project_labelling_configure / _start, which
    # refuse changes once labelling has started.
    labelling_fields = [
        "serving_order",
        "serving_seed",
        "allow_self_adjudication",
        "labelling_started_at",
    ]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # The slug names the project in URLs and exports; the split is frozen by its service.
        started = obj is not None and obj.labelling_started_at is not None
        return [
            "created_at",
            *self.partition_fields,
            *self.labelling_fields,
            *(["slug"] if obj is not None else []),
            *(["overlap"] if started else []),
        ]

    def save_model(self, request: HttpRequest, obj: Project, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        # A new project goes through the service so that it gets label policy v1.
        created = project_create(slug=obj.slug, name=obj.name, description=obj.description)
        Project.objects.filter(pk=created.pk).update(
            overlap=obj.overlap, lease_minutes=obj.lease_minutes
        )
        obj.pk = created.pk
        obj.created_at = created.created_at

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Deleting a project would cascade through its labels; pinned sources refuse it anyway.
        return False


@admin.register(LabelPolicy)
class LabelPolicyAdmin(admin.ModelAdmin):
    list_display = ["project", "version", "evidence_relation", "frozen_at", "created_at"]
    list_filter = ["evidence_relation", ("frozen_at", admin.EmptyFieldListFilter)]
    search_fields = ["project__slug", "guideline"]
    raw_id_fields = ["project", "previous"]
    list_select_related = ["project"]
    readonly_fields = ["project", "version", "previous", "frozen_at", "created_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # New versions come from policy_create, which links them to the previous one.
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A frozen policy never changes: a change is a new version.
        if obj is not None and obj.frozen_at is not None:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class MembershipAdminForm(forms.ModelForm):
    """The membership form; it keeps the project's last active manager.

    A change that would leave the project without one is refused beside the role (the services
    refuse it again under the project's lock).
    """

    class Meta:
        model = Membership
        fields = ["project", "user", "role", "is_active"]

    def clean(self) -> dict[str, Any]:
        """Refuse demoting or deactivating the project's last active manager."""
        data = super().clean() or {}
        if self.instance.pk is not None and "role" in data:
            refusal = membership_refusal(
                self.instance, role=data["role"], is_active=data.get("is_active", False)
            )
            if refusal is not None:
                self.add_error("role", refusal)
        return data


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    """Memberships, written through the membership services (the last-manager rule holds)."""

    form = MembershipAdminForm
    list_display = ["project", "user", "role", "is_active", "from_groups", "created_at"]
    list_filter = ["role", "is_active", "from_groups", "project"]
    search_fields = ["project__slug", "user__username", "user__email"]
    raw_id_fields = ["project", "user"]
    list_select_related = ["project", "user"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # A membership is one (project, user): another pair is another membership.
        if obj is not None:
            return ["project", "user", "from_groups", "created_at"]
        return ["from_groups", "created_at"]

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        # The bulk delete would bypass the services; members are removed one at a time.
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and membership_refusal(obj, role="", is_active=False) is not None:
            return False  # the project's last active manager
        return super().has_delete_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        project, user_id = obj.project, obj.user_id
        if not change:
            saved = membership_set(project=project, user=obj.user, role=obj.role)
        else:
            saved = membership_change(project=project, actor=None, user_id=user_id, role=obj.role)
        if obj.is_active != saved.is_active:
            toggle = membership_reactivate if obj.is_active else membership_deactivate
            saved = toggle(project=project, actor=None, user_id=user_id)
        obj.pk, obj.created_at, obj.is_active = saved.pk, saved.created_at, saved.is_active

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        membership_remove(project=obj.project, actor=None, user_id=obj.user_id)


class KeepingUserAdmin(UserAdmin):
    """Django's user admin, refusing to delete the only active manager of a project.

    Deleting an account deletes its memberships; the last-manager rule holds here too.
    """

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        # The bulk delete would not check each account; accounts are deleted one at a time.
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and projects_kept_by(obj.pk):
            return False  # the only active manager of a project
        return super().has_delete_permission(request, obj)


if admin.site.is_registered(get_user_model()):
    admin.site.unregister(get_user_model())
admin.site.register(get_user_model(), KeepingUserAdmin)


@admin.register(Invitation)
class InvitationAdmin(ReadOnlyAdmin):
    """Invitations, view-only (their join tokens are stored only as hashes)."""

    list_display = ["project", "invitee", "role", "status", "invited_by", "expires_at"]
    list_filter = ["status", "role", "project"]
    search_fields = ["invitee", "project__slug"]
    raw_id_fields = ["project", "user", "invited_by"]
    list_select_related = ["project", "invited_by"]
    exclude = ["token_hash"]


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    """API tokens, view-only: their secrets are stored only as hashes; owners revoke them."""

    list_display = [
        "user",
        "name",
        "prefix",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["revoked_reason"]
    search_fields = ["user__username", "name", "prefix"]
    raw_id_fields = ["user"]
    list_select_related = ["user"]
    exclude = ["digest"]


@admin.register(SsoIdentity)
class SsoIdentityAdmin(ReadOnlyAdmin):
    """Single sign-on identities, view-only (the provider's refresh tokens are not shown)."""

    list_display = ["user", "issuer", "subject", "signed_in_at", "checked_at", "lapsed_at"]
    list_filter = ["issuer"]
    search_fields = ["user__username", "subject"]
    raw_id_fields = ["user"]
    list_select_related = ["user"]
    exclude = ["refresh_token"]


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    """Background jobs (large imports, labelling starts): written by the services and workers."""

    list_display = [
        "id",
        "project",
        "kind",
        "status",
        "progress_done",
        "progress_total",
        "attempts",
        "lease_owner",
        "heartbeat_at",
        "created_at",
    ]
    list_filter = ["kind", "status"]
    search_fields = ["project__slug", "message"]


@admin.register(PeriodicRun)
class PeriodicRunAdmin(ReadOnlyAdmin):
    """When each periodic task last acted (one row per task; written by the tasks)."""

    list_display = ["name", "last_at"]
    search_fields = ["name"]
