"""Fixtures of the labelling-work API tests: a started project, token clients, label bodies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from labeling.models import Claim, Item, Project, Role, SourceVersion
from labeling.services import (
    AnnotationInput,
    ClaimInput,
    annotation_submit,
    item_claim_next,
    project_labelling_configure,
    project_labelling_start,
)
from labeling.services.tokens import api_token_create
from tests.factories import WORK_SOURCE, utf16_span, work_record


@pytest.fixture
def manager(member: Callable[[str], Any]) -> Any:
    return member(Role.MANAGER)


@pytest.fixture
def started(project: Project, import_records: Callable[..., Any], manager: Any) -> Project:
    """``project`` with two questions (four items), overlap 2, labelling started."""
    import_records([work_record("q1"), work_record("q2")])
    project_labelling_configure(project=project, actor=manager, overlap=2)
    return project_labelling_start(project=project, actor=manager)


@pytest.fixture
def client_for() -> Callable[[Any], APIClient]:
    """An API client authenticated with ``user``'s token: ``client_for(user).get(url)``."""

    def make(user: Any) -> APIClient:
        client = APIClient()
        secret = api_token_create(user=user, name="test").secret
        client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
        return client

    return make


def claim_ids(item: Item) -> list[int]:
    """The ids of the item's claims, by index."""
    return list(
        Claim.objects.filter(candidate_id=item.candidate_id)
        .order_by("index")
        .values_list("pk", flat=True)
    )


def source_of(item: Item) -> SourceVersion:
    """The item's (single) pinned source version."""
    return SourceVersion.objects.get(retrievals__question_id=item.candidate.question_id)


def span(item: Item, quote: str) -> dict[str, Any]:
    """An evidence body for ``quote`` with the UTF-16 offsets a browser sends."""
    start, end = utf16_span(WORK_SOURCE, quote)
    return {"source_version_id": source_of(item).pk, "start": start, "end": end, "quote": quote}


def labels_body(item: Item, answer: str = "admissible", claim: str = "not_supported") -> dict:
    """A submission body: ``answer`` for the answer, ``claim`` for every claim (no evidence)."""
    return {
        "answer_label": answer,
        "claims": [{"claim_id": c, "label": claim} for c in claim_ids(item)],
    }


def labels_input(item: Item, answer: str = "admissible", claim: str = "not_supported"):
    """The same labels as service input."""
    return AnnotationInput(
        answer_label=answer,
        claims=tuple(ClaimInput(claim_id=c, label=claim) for c in claim_ids(item)),
    )


@pytest.fixture
def disputed(started: Project, member: Callable[[str], Any]) -> Item:
    """The first item, labelled admissible by one annotator and inadmissible by another."""
    for answer in ("admissible", "inadmissible"):
        user = member(Role.ANNOTATOR)
        assignment = item_claim_next(project=started, actor=user)
        annotation_submit(
            project=started,
            assignment_id=assignment.pk,
            actor=user,
            data=labels_input(assignment.item, answer=answer),
        )
    item = assignment.item
    item.refresh_from_db()
    assert item.status == "disagreement"
    return item
