"""Django admin for every labelling model.

Imported data (sources, questions, candidates, claims, items, evaluator labels, prior annotations,
import batches) is read-only here: it is immutable by design (fingerprints, pinned sha256, DB
triggers on source versions), and changes go through an import. Labelling work (assignments,
annotations and their revisions, disagreements, resolutions) is read-only too: it changes only
through the services, which keep slot counters, optimistic-locking versions and the append-only
history consistent. Projects are created through ``project_create`` so they get label policy v1;
the partition is frozen through ``partition_freeze``, never by editing fields. Memberships are
added, changed and deleted through the membership services, so the admin keeps a project's last
active manager like every other way in; invitations are view-only (they change by being
accepted, declined or revoked).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.http import HttpRequest

from labeling.models import (
    Annotation,
    AnnotationRevision,
    ApiToken,
    Assignment,
    CandidateAnswer,
    Claim,
    ClaimLabel,
    DerivedChange,
    Disagreement,
    Evaluator,
    EvaluatorLabel,
    EvidenceSpan,
    GoldClaimLabel,
    GoldEvidence,
    GoldReference,
    ImportBatch,
    Invitation,
    Item,
    ItemVotes,
    Job,
    LabelPolicy,
    Membership,
    PeriodicRun,
    PriorAnnotation,
    PriorClaimLabel,
    PriorEvidence,
    PriorSpan,
    Project,
    Qualification,
    Question,
    Resolution,
    ResolvedClaimLabel,
    ResolvedEvidence,
    RetrievalLink,
    SourceDocument,
    SourceVersion,
    SsoIdentity,
    VoteTally,
    VoteTallyDelta,
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


class ReadOnlyAdmin(admin.ModelAdmin):
    """View-only admin: no add, change or delete, whatever the user's model permissions."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyInline(admin.TabularInline):
    """A view-only inline."""

    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


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


@admin.register(ImportBatch)
class ImportBatchAdmin(ReadOnlyAdmin):
    list_display = ["id", "project", "format", "filename", "created_by", "created_at"]
    list_filter = ["format", "project"]
    search_fields = ["filename", "file_sha256", "project__slug"]
    raw_id_fields = ["project", "created_by"]
    list_select_related = ["project", "created_by"]


# ---------------------------------------------------------------------------------------------
# Pinned sources
# ---------------------------------------------------------------------------------------------


class SourceVersionInline(ReadOnlyInline):
    model = SourceVersion
    fields = readonly_fields = ("sha256", "length", "published_at", "observed_at", "created_at")


@admin.register(SourceDocument)
class SourceDocumentAdmin(ReadOnlyAdmin):
    list_display = ["key", "project", "uri"]
    list_filter = ["project"]
    search_fields = ["key", "uri"]
    raw_id_fields = ["project"]
    list_select_related = ["project"]
    inlines = [SourceVersionInline]


@admin.register(SourceVersion)
class SourceVersionAdmin(ReadOnlyAdmin):
    """Pinned texts: view only. The database refuses UPDATEs of text, sha256 and length too."""

    list_display = ["id", "document", "sha256", "length", "published_at", "observed_at"]
    list_filter = ["document__project", ("published_at", admin.EmptyFieldListFilter)]
    search_fields = ["sha256", "document__key", "uri"]
    raw_id_fields = ["document", "import_batch"]
    list_select_related = ["document"]


@admin.register(RetrievalLink)
class RetrievalLinkAdmin(ReadOnlyAdmin):
    list_display = ["id", "question", "source_version", "rank", "score"]
    list_filter = ["question__project"]
    search_fields = ["question__external_id", "source_version__document__key"]
    raw_id_fields = ["question", "source_version"]
    list_select_related = ["question", "source_version__document"]


# ---------------------------------------------------------------------------------------------
# Questions, candidates, claims, items
# ---------------------------------------------------------------------------------------------


@admin.register(Question)
class QuestionAdmin(ReadOnlyAdmin):
    list_display = ["external_id", "project", "partition", "group_key", "created_at"]
    list_filter = ["project", "partition"]
    search_fields = ["external_id", "text", "group_key"]
    raw_id_fields = ["project", "import_batch"]
    list_select_related = ["project"]


class ClaimInline(ReadOnlyInline):
    model = Claim
    fields = readonly_fields = ("index", "text", "start", "end", "unanchored", "machine_split")


@admin.register(CandidateAnswer)
class CandidateAnswerAdmin(ReadOnlyAdmin):
    list_display = ["id", "question", "key", "generator", "sample_index", "is_selected"]
    list_filter = ["question__project", "generator", "is_selected"]
    search_fields = ["key", "question__external_id", "text"]
    raw_id_fields = ["question"]
    list_select_related = ["question"]
    inlines = [ClaimInline]


@admin.register(Claim)
class ClaimAdmin(ReadOnlyAdmin):
    list_display = ["id", "candidate", "index", "start", "end", "unanchored", "machine_split"]
    list_filter = ["unanchored", "machine_split", "candidate__question__project"]
    search_fields = ["text", "candidate__key", "candidate__question__external_id"]
    raw_id_fields = ["candidate"]
    list_select_related = ["candidate__question"]


@admin.register(Item)
class ItemAdmin(ReadOnlyAdmin):
    list_display = ["id", "project", "candidate", "status", "assigned_count", "version"]
    list_filter = ["project", "status", "candidate__question__partition"]
    search_fields = ["candidate__key", "candidate__question__external_id"]
    raw_id_fields = ["project", "candidate"]
    list_select_related = ["project", "candidate__question"]


# ---------------------------------------------------------------------------------------------
# Evaluators and prior annotations
# ---------------------------------------------------------------------------------------------


@admin.register(Evaluator)
class EvaluatorAdmin(ReadOnlyAdmin):
    list_display = ["name", "version", "project"]
    list_filter = ["project"]
    search_fields = ["name", "version", "description"]
    raw_id_fields = ["project"]
    list_select_related = ["project"]


@admin.register(EvaluatorLabel)
class EvaluatorLabelAdmin(ReadOnlyAdmin):
    list_display = ["id", "evaluator", "candidate", "claim", "label", "score", "available"]
    list_filter = ["available", "evaluator", "evaluator__project"]
    search_fields = ["label", "candidate__key", "candidate__question__external_id"]
    raw_id_fields = ["evaluator", "candidate", "claim", "import_batch"]
    list_select_related = ["evaluator", "candidate__question", "claim"]


class PriorClaimLabelInline(ReadOnlyInline):
    model = PriorClaimLabel
    fields = readonly_fields = ("claim", "label", "reason", "raw_label")


class PriorSpanInline(ReadOnlyInline):
    model = PriorSpan
    fields = readonly_fields = ("start", "end", "quote", "labels", "note")


@admin.register(PriorAnnotation)
class PriorAnnotationAdmin(ReadOnlyAdmin):
    list_display = ["id", "candidate", "annotator", "origin", "answer_label", "answer_reason"]
    list_filter = ["origin", "answer_label", "candidate__question__project"]
    search_fields = ["annotator", "candidate__key", "candidate__question__external_id", "note"]
    raw_id_fields = ["candidate", "import_batch"]
    list_select_related = ["candidate__question"]
    inlines = [PriorClaimLabelInline, PriorSpanInline]


@admin.register(PriorClaimLabel)
class PriorClaimLabelAdmin(ReadOnlyAdmin):
    list_display = ["id", "prior_annotation", "claim", "label", "reason"]
    list_filter = ["label"]
    search_fields = ["prior_annotation__annotator", "claim__text"]
    raw_id_fields = ["prior_annotation", "claim"]
    list_select_related = ["prior_annotation", "claim"]


@admin.register(PriorEvidence)
class PriorEvidenceAdmin(ReadOnlyAdmin):
    list_display = ["id", "claim_label", "source_version", "start", "end"]
    search_fields = ["quote"]
    raw_id_fields = ["claim_label", "source_version"]
    list_select_related = ["claim_label", "source_version__document"]


@admin.register(PriorSpan)
class PriorSpanAdmin(ReadOnlyAdmin):
    list_display = ["id", "prior_annotation", "start", "end", "evidence_source_version"]
    search_fields = ["quote", "note", "prior_annotation__annotator"]
    raw_id_fields = ["prior_annotation", "evidence_source_version"]
    list_select_related = ["prior_annotation", "evidence_source_version__document"]


# ---------------------------------------------------------------------------------------------
# Labelling work (read-only: it changes only through the services)
# ---------------------------------------------------------------------------------------------


@admin.register(Assignment)
class AssignmentAdmin(ReadOnlyAdmin):
    list_display = ["id", "item", "annotator", "slot", "status", "leased_at", "lease_expires_at"]
    list_filter = ["status", "item__project"]
    search_fields = ["annotator__username", "item__candidate__key"]
    raw_id_fields = ["item", "annotator"]
    list_select_related = ["item", "annotator"]


class AnnotationRevisionInline(ReadOnlyInline):
    model = AnnotationRevision
    fk_name = "annotation"
    fields = readonly_fields = (
        "number",
        "created_by",
        "policy",
        "answer_label",
        "answer_reason",
        "created_at",
    )


@admin.register(Annotation)
class AnnotationAdmin(ReadOnlyAdmin):
    list_display = ["id", "item", "annotator", "revision_count", "created_at"]
    list_filter = ["item__project"]
    search_fields = ["annotator__username", "item__candidate__key"]
    raw_id_fields = ["item", "annotator", "assignment", "current"]
    list_select_related = ["item", "annotator"]
    inlines = [AnnotationRevisionInline]


class ClaimLabelInline(ReadOnlyInline):
    model = ClaimLabel
    fields = readonly_fields = ("claim", "label", "reason", "boundary_error")


@admin.register(AnnotationRevision)
class AnnotationRevisionAdmin(ReadOnlyAdmin):
    list_display = ["id", "annotation", "number", "created_by", "answer_label", "created_at"]
    list_filter = ["answer_label", "policy"]
    search_fields = ["comment", "created_by__username"]
    raw_id_fields = ["annotation", "previous", "created_by", "policy"]
    list_select_related = ["annotation", "created_by"]
    inlines = [ClaimLabelInline]


@admin.register(ClaimLabel)
class ClaimLabelAdmin(ReadOnlyAdmin):
    list_display = ["id", "revision", "claim", "label", "reason", "boundary_error"]
    list_filter = ["label", "boundary_error"]
    search_fields = ["claim__text"]
    raw_id_fields = ["revision", "claim"]
    list_select_related = ["revision", "claim"]


@admin.register(EvidenceSpan)
class EvidenceSpanAdmin(ReadOnlyAdmin):
    list_display = ["id", "claim_label", "source_version", "start", "end"]
    search_fields = ["quote"]
    raw_id_fields = ["claim_label", "source_version"]
    list_select_related = ["claim_label", "source_version__document"]


@admin.register(Disagreement)
class DisagreementAdmin(ReadOnlyAdmin):
    list_display = ["id", "item", "answer_differs", "claims_differ", "opened_at", "closed_at"]
    list_filter = ["answer_differs", "claims_differ", "item__project"]
    search_fields = ["item__candidate__key"]
    raw_id_fields = ["item", "closed_by"]
    list_select_related = ["item"]


class ResolvedClaimLabelInline(ReadOnlyInline):
    model = ResolvedClaimLabel
    fields = readonly_fields = ("claim", "label", "reason")


@admin.register(Resolution)
class ResolutionAdmin(ReadOnlyAdmin):
    list_display = ["id", "item", "number", "status", "answer_label", "adjudicator", "created_at"]
    list_filter = ["status", "unresolved_reason", "item__project"]
    search_fields = ["rationale", "item__candidate__key"]
    raw_id_fields = ["item", "supersedes", "policy", "adjudicator"]
    list_select_related = ["item", "adjudicator"]
    inlines = [ResolvedClaimLabelInline]


@admin.register(ResolvedClaimLabel)
class ResolvedClaimLabelAdmin(ReadOnlyAdmin):
    list_display = ["id", "resolution", "claim", "label", "reason"]
    list_filter = ["label"]
    search_fields = ["claim__text"]
    raw_id_fields = ["resolution", "claim"]
    list_select_related = ["resolution", "claim"]


@admin.register(ResolvedEvidence)
class ResolvedEvidenceAdmin(ReadOnlyAdmin):
    list_display = ["id", "claim_label", "source_version", "start", "end"]
    search_fields = ["quote"]
    raw_id_fields = ["claim_label", "source_version"]
    list_select_related = ["claim_label", "source_version__document"]


# ---------------------------------------------------------------------------------------------
# Gold items and qualification: written by the services (references are append-only)
# ---------------------------------------------------------------------------------------------


class GoldClaimLabelInline(ReadOnlyInline):
    model = GoldClaimLabel
    fields = readonly_fields = ("claim", "label", "reason")


@admin.register(GoldReference)
class GoldReferenceAdmin(ReadOnlyAdmin):
    list_display = ["id", "item", "number", "answer_label", "created_by", "created_at"]
    list_filter = ["answer_label", "item__project"]
    search_fields = ["rationale", "item__candidate__key"]
    raw_id_fields = ["item", "supersedes", "policy", "created_by", "import_batch"]
    list_select_related = ["item", "created_by"]
    inlines = [GoldClaimLabelInline]


@admin.register(GoldClaimLabel)
class GoldClaimLabelAdmin(ReadOnlyAdmin):
    list_display = ["id", "reference", "claim", "label", "reason"]
    list_filter = ["label"]
    search_fields = ["claim__text"]
    raw_id_fields = ["reference", "claim"]
    list_select_related = ["reference", "claim"]


@admin.register(GoldEvidence)
class GoldEvidenceAdmin(ReadOnlyAdmin):
    list_display = ["id", "claim_label", "source_version", "start", "end"]
    search_fields = ["quote"]
    raw_id_fields = ["claim_label", "source_version"]
    list_select_related = ["claim_label", "source_version__document"]


@admin.register(Qualification)
class QualificationAdmin(ReadOnlyAdmin):
    """Decided on the gold page (``qualification_decide``), never edited here."""

    list_display = ["id", "project", "annotator", "status", "agreed", "compared", "evaluated_at"]
    list_filter = ["status", "project"]
    search_fields = ["annotator__username", "decision_note"]
    raw_id_fields = ["project", "annotator", "policy", "decided_by"]
    list_select_related = ["project", "annotator"]


@admin.register(DerivedChange)
class DerivedChangeAdmin(ReadOnlyAdmin):
    """The staleness marks of derived results: written by the services, deleted once covered."""

    list_display = ["id", "project", "kind", "created_at"]
    list_filter = ["kind"]
    search_fields = ["project__slug"]


@admin.register(VoteTally)
class VoteTallyAdmin(ReadOnlyAdmin):
    """A project's vote tally as of its last fold (counted again on "Recompute now")."""

    list_display = ["project", "folded_at", "default_version"]
    search_fields = ["project__slug"]


@admin.register(ItemVotes)
class ItemVotesAdmin(ReadOnlyAdmin):
    """Each item's votes as last counted into its project's tally."""

    list_display = ["item", "project"]
    search_fields = ["project__slug"]


@admin.register(VoteTallyDelta)
class VoteTallyDeltaAdmin(ReadOnlyAdmin):
    """Changes of a project's vote tally not folded yet: inserted by votes, deleted by the fold."""

    list_display = ["id", "project"]
    search_fields = ["project__slug"]


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
