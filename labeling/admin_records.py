"""Django admin of the labelling records, view-only: imported data, labelling work, gold, tallies.

Imported data (sources, questions, candidates, claims, items, evaluator labels, prior annotations,
import batches) is immutable by design (fingerprints, pinned sha256, DB triggers on source
versions) and changes only through an import. Labelling work (assignments, annotations and their
revisions, disagreements, resolutions) changes only through the services, which keep slot
counters, optimistic-locking versions and the append-only history consistent.
:mod:`labeling.admin` registers them by importing this module's base classes.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from labeling.models import (
    Annotation,
    AnnotationRevision,
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
    Item,
    ItemVotes,
    PriorAnnotation,
    PriorClaimLabel,
    PriorEvidence,
    PriorSpan,
    Qualification,
    Question,
    Resolution,
    ResolvedClaimLabel,
    ResolvedEvidence,
    RetrievalLink,
    SourceDocument,
    SourceVersion,
    VoteTally,
    VoteTallyDelta,
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
