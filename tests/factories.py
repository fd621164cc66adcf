"""factory_boy factories for tests."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import factory
from django.contrib.auth import get_user_model
from django.db.models import F
from django.utils import timezone


class UserFactory(factory.django.DjangoModelFactory):
    """A user with password ``pw-<username>``."""

    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.org")
    password = factory.PostGenerationMethodCall("set_password", "pw-secret")

    @factory.post_generation
    def _save(obj, create, extracted, **kwargs):  # noqa: N805
        if create:
            obj.save()


# -- labelling work ---------------------------------------------------------------------------


class AssignmentFactory(factory.django.DjangoModelFactory):
    """A leased assignment of ``item`` (required) to a new annotator, in its smallest free slot.

    Kept consistent with what ``item_claim_next`` writes: a live (leased or submitted) assignment
    adds one to ``item.assigned_count``, and the annotator is made an annotator of the item's
    project if they are not a member yet. Pass ``slot`` to force one.
    """

    class Meta:
        model = "labeling.Assignment"

    annotator = factory.SubFactory(UserFactory)
    status = "leased"
    leased_at = factory.LazyFunction(timezone.now)
    lease_expires_at = factory.LazyAttribute(lambda a: a.leased_at + timedelta(minutes=30))

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        from labeling.models import LIVE_ASSIGNMENT_STATUSES, Item, Membership, Role

        item = kwargs["item"]
        annotator = kwargs["annotator"]
        if "slot" not in kwargs:
            held = set(
                model_class.objects.filter(
                    item=item, status__in=LIVE_ASSIGNMENT_STATUSES
                ).values_list("slot", flat=True)
            )
            kwargs["slot"] = next(s for s in range(1, 1000) if s not in held)
        if kwargs["status"] == "submitted" and kwargs.get("submitted_at") is None:
            kwargs["submitted_at"] = timezone.now()
        Membership.objects.get_or_create(
            project_id=item.project_id, user=annotator, defaults={"role": Role.ANNOTATOR}
        )
        assignment = super()._create(model_class, *args, **kwargs)
        if assignment.status in LIVE_ASSIGNMENT_STATUSES:
            Item.objects.filter(pk=item.pk).update(assigned_count=F("assigned_count") + 1)
            item.refresh_from_db()
        return assignment


def start_labelling(project: Any, **settings: Any) -> Any:
    """Configure (``overlap=`` etc.) and start labelling through the real services.

    A new manager does it. Returns the refreshed project.
    """
    from labeling.models import Role
    from labeling.services import (
        membership_set,
        project_labelling_configure,
        project_labelling_start,
    )

    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    if settings:
        project_labelling_configure(project=project, actor=manager, **settings)
    return project_labelling_start(project=project, actor=manager)


# A pinned source with the characters browsers count differently from Python: an emoji with a
# skin-tone modifier (two code points, four UTF-16 units), a combining accent, a flag (two
# regional indicators) and CRLF line endings.
WORK_SOURCE = (
    "The bridge opened in 1932 \U0001f44d\U0001f3fd.\r\n"
    "It spans the harbour of Sydney; cafe\u0301s line its south end \U0001f1e6\U0001f1fa.\r\n"
    "About 160,000 vehicles cross it each day."
)


def work_record(external_id: str = "q1", **overrides: Any) -> dict[str, Any]:
    """A native record for labelling: one :data:`WORK_SOURCE`, two candidates with claims.

    ``c0`` has two claims (both true), ``c1`` one (false).
    """
    record: dict[str, Any] = {
        "external_id": external_id,
        "text": "When did the bridge open, and what does it span?",
        "metadata": {"reference": "opened 1932; spans Sydney harbour"},
        "sources": [{"id": f"doc-{external_id}", "text": WORK_SOURCE, "rank": 1}],
        "candidates": [
            {
                "id": "c0",
                "text": "It opened in 1932. It spans the harbour.",
                "generator": "model-a",
                "claims": [{"text": "It opened in 1932."}, {"text": "It spans the harbour."}],
            },
            {
                "id": "c1",
                "text": "It opened in 1931.",
                "generator": "model-b",
                "claims": [{"text": "It opened in 1931."}],
            },
        ],
    }
    record.update(overrides)
    return record


def utf16_span(text: str, quote: str, occurrence: int = 0) -> tuple[int, int]:
    """Return the UTF-16 offsets a browser reports for the ``occurrence``-th ``quote`` in text."""
    start = -1
    for _ in range(occurrence + 1):
        start = text.index(quote, start + 1)
    units = len(text[:start].encode("utf-16-le")) // 2
    return units, units + len(quote.encode("utf-16-le")) // 2


# -- calibration ------------------------------------------------------------------------------


class CalibrationSpecFactory(factory.django.DjangoModelFactory):
    """A valid selective-risk spec (``project`` required); the content hash is computed.

    Writes the row directly (no service rules): use ``make_spec`` for the service path.
    """

    class Meta:
        model = "certification.CalibrationSpec"

    name = factory.Sequence(lambda n: f"spec-{n}")
    method = "selective_risk"
    alpha = "0.1"
    delta = "0.05"
    thresholds = factory.LazyFunction(lambda: [0.5, 0.7, 0.9])
    acceptance = ">="
    score_field = "acceptance_score"
    selector = "is_selected"
    content_sha256 = "0" * 64

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        from decimal import Decimal

        from certification.contract import spec_sha256

        spec = model_class(*args, **kwargs)
        for key in ("alpha", "delta", "report_confidence", "stopping_delta"):
            value = getattr(spec, key)
            if value is not None and not isinstance(value, Decimal):
                setattr(spec, key, Decimal(str(value)))
        spec.content_sha256 = spec_sha256(spec)
        spec.save()
        return spec


def make_spec(project: Any, *, actor: Any = None, name: str = "main", **fields: Any) -> Any:
    """Create a spec through ``calibration_spec_create`` (a new manager acts when none given).

    Defaults: selective risk on ``acceptance_score`` >= t for t in 0.5, 0.7, 0.9, alpha 0.1,
    delta 0.05, the selected answer.
    """
    from certification.services import calibration_spec_create
    from labeling.models import Role
    from labeling.services import membership_set

    if actor is None:
        actor = UserFactory()
        membership_set(project=project, user=actor, role=Role.MANAGER)
    values = {
        "method": "selective_risk",
        "alpha": "0.1",
        "delta": "0.05",
        "thresholds": [0.5, 0.7, 0.9],
        "score_field": "acceptance_score",
        "selector": "is_selected",
        **fields,
    }
    return calibration_spec_create(project=project, actor=actor, name=name, **values)


def calibration_candidate(
    key: str,
    *,
    answer: str | None = None,
    label: str | None = "admissible",
    score: float | None = None,
    selected: bool = False,
    retrieval: float | None = None,
    confidence: float | None = None,
    labels: tuple[str, ...] = (),
    reason: str | None = None,
    claims: tuple[str, ...] = (),
    frequency_rank: int | None = None,
    evaluator: tuple[str, str, float | None] | None = None,
) -> dict[str, Any]:
    """A native candidate for calibration tests.

    ``label`` is an imported prior answer label (one vote; None leaves the item to be labelled:
    pending), with ``reason`` for ``evidence_unavailable``; ``labels`` several prior votes (they
    may disagree); ``claims`` the prior labels of the answer's claims, one claim ("S1.",
    "S2.", ...) per label; ``evaluator`` a (name, version, score) evaluator label.
    """
    sentences = [f"S{i}." for i in range(1, len(claims) + 1)]
    text = f"The answer is {answer}." if answer is not None else "I cannot tell."
    candidate: dict[str, Any] = {
        "id": key,
        "text": " ".join([text, *sentences]),
        "generator": "model-a",
        "canonical_form": answer,
        "acceptance_score": score,
        "retrieval_score": retrieval,
        "confidence": confidence,
        "is_selected": selected,
        "frequency_rank": frequency_rank,
        "claims": [{"text": sentence} for sentence in sentences],
    }
    votes = labels or ((label,) if label is not None else ())
    candidate["prior_annotations"] = [
        {
            "annotator": f"p{i}",
            "answer_label": vote,
            "answer_reason": reason,
            "claim_labels": [{"claim": j, "label": c} for j, c in enumerate(claims)],
        }
        for i, vote in enumerate(votes)
    ]
    if evaluator is not None:
        name, version, value = evaluator
        candidate["evaluator_labels"] = [
            {"evaluator": name, "version": version, "score": value, "available": value is not None}
        ]
    return candidate


def calibration_record(
    external_id: str,
    candidates: list[dict[str, Any]],
    *,
    group_key: str = "",
    slices: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A native question record with the given candidates and no sources (external truth)."""
    return {
        "external_id": external_id,
        "text": f"Question {external_id}?",
        "group_key": group_key,
        "slices": slices or {},
        "candidates": candidates,
    }


def calibration_project(project: Any, partitions: dict[str, list[dict[str, Any]]]) -> Any:
    """Import records into ``project``, place each question in its partition, start labelling.

    ``partitions`` maps ``"calibration"`` / ``"test"`` / ``"dev"`` to native records. Labelling
    starts with overlap 1, so every candidate's single imported prior label resolves as
    consensus (several differing labels open a disagreement); candidates without a prior label
    stay open (pending). The partition is written straight into the questions (a test stand-in
    for ``partition_freeze``'s seeded deal).
    """
    import io

    from django.utils import timezone

    from labeling.importers.native import read_jsonl
    from labeling.models import Project, Question
    from labeling.services import workload_import
    from labeling.services.imports import fingerprint
    from tests.conftest import jsonl_bytes

    records = [r for rows in partitions.values() for r in rows]
    data = jsonl_bytes(records)
    workload_import(
        project=project,
        records=read_jsonl(io.BytesIO(data)),
        format="native",
        filename="calibration.jsonl",
        file_sha256=fingerprint(data.decode("utf-8")),
    )
    for partition, rows in partitions.items():
        Question.objects.filter(
            project=project, external_id__in=[r["external_id"] for r in rows]
        ).update(partition=partition)
    Project.objects.filter(pk=project.pk).update(
        partition_seed=0,
        partition_proportions={k: 1 / len(partitions) for k in partitions},
        partition_frozen_at=timezone.now(),
    )
    project.refresh_from_db()
    return start_labelling(project, overlap=1)
