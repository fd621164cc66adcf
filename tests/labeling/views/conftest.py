"""Fixtures of the labelling and adjudication page tests: a started project and form posts."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.urls import reverse

from labeling.models import Assignment, Claim, Item, Project, Role, SourceVersion
from labeling.services import item_claim_next
from tests.factories import start_labelling, utf16_span, work_record

# Markers that must never reach an annotator (annotators see only their own work).
EVALUATOR = "judge-secret-eval"
EVALUATOR_SCORE = "0.8125"
PRIOR_ANNOTATOR = "prior-annotator-zeta"
PRIOR_NOTE = "PRIOR-NOTE-MARKER"
METADATA = "REFERENCE-SOLUTION-MARKER"


def secret_record(external_id: str = "q1") -> dict[str, Any]:
    """:func:`work_record` whose question carries metadata and whose ``c0`` carries an evaluator
    label and a prior annotation with an answer label (one prior vote)."""
    record = work_record(external_id)
    record["metadata"] = {"reference": METADATA}
    record["candidates"][0]["evaluator_labels"] = [
        {"evaluator": EVALUATOR, "version": "v9", "label": "admissible", "score": 0.8125}
    ]
    record["candidates"][0]["prior_annotations"] = [
        {"annotator": PRIOR_ANNOTATOR, "answer_label": "inadmissible", "note": PRIOR_NOTE}
    ]
    return record


@pytest.fixture
def started(project: Project, import_records: Callable[..., Any]) -> Project:
    """The project with two :func:`work_record` questions, labelling started with overlap 2."""
    import_records([work_record("q1"), work_record("q2")])
    return start_labelling(project, overlap=2)


@pytest.fixture
def annotator(member: Callable[[str], Any]) -> Any:
    return member(Role.ANNOTATOR)


def form_url(assignment: Assignment) -> str:
    return reverse("annotate-form", args=[assignment.item.project.slug, assignment.pk])


def claim_next(project: Project, user: Any) -> Assignment:
    assignment = item_claim_next(project=project, actor=user)
    assert assignment is not None
    return assignment


def evidence_fields(
    claim: Claim, n: int, version: SourceVersion, quote: str, occurrence: int = 0
) -> dict[str, str]:
    """The hidden inputs the page's script writes for a selection of ``quote`` (UTF-16)."""
    start, end = utf16_span(version.text, quote, occurrence)
    prefix = f"claim-{claim.pk}-evidence-{n}-"
    return {
        f"{prefix}source_version_id": str(version.pk),
        f"{prefix}start": str(start),
        f"{prefix}end": str(end),
        f"{prefix}quote_json": json.dumps(quote),
        f"{prefix}unit": "utf16",
    }


def labels_post(
    item: Item,
    *,
    answer: str = "admissible",
    claim_labels: tuple[str, ...] | None = None,
    quotes: tuple[str, ...] | None = None,
    **extra: str,
) -> dict[str, str]:
    """A complete, valid POST of the labelling form for ``item`` (every claim supported)."""
    claims = list(item.candidate.claims.order_by("index"))
    version = SourceVersion.objects.get(retrievals__question=item.candidate.question)
    labels = claim_labels or tuple("supported" for _ in claims)
    default_quotes = ("opened in 1932", "It spans the harbour", "opened in 1932")
    quotes = quotes or default_quotes[: len(claims)]
    data: dict[str, str] = {"answer_label": answer, "comment": "", "time_spent_seconds": "12.5"}
    for claim, label, quote in zip(claims, labels, quotes, strict=False):
        data[f"claim-{claim.pk}-label"] = label
        if label in ("supported", "contradicted"):
            data.update(evidence_fields(claim, 0, version, quote))
    data.update(extra)
    return data


@pytest.fixture
def other_annotator(member: Callable[[str], Any]) -> Any:
    return member(Role.ANNOTATOR)
