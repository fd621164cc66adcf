"""Shared page model of the labelling and adjudication forms (claims, labels, evidence chips)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from labeling.exceptions import LabelingError
from labeling.forms import ClaimState, EvidenceState, LabelsState
from labeling.models import CANNOT_DECIDE
from labeling.selectors.review import ClaimRow, SourceRow, Vote
from labeling.views.catalog import answer_segments
from labeling.vocabulary import EVIDENCE_UNAVAILABLE

# A service names the offending input, e.g. ``claims[2].evidence[0].quote`` (``2``: the claim's
# position in the submitted tuple, which is the page's claim order).
CLAIM_FIELD = re.compile(r"^claims\[(\d+)\]")


@dataclass(frozen=True)
class LabelOption:
    """A radio button: its value, its text and its keyboard shortcut (1-based)."""

    value: str
    text: str
    key: int


def label_options(labels: Iterable[str], *, cannot_decide: bool) -> list[LabelOption]:
    """Return the radio options of a label group, "can't decide" last when offered."""
    values = [*labels, *([CANNOT_DECIDE] if cannot_decide else [])]
    return [
        LabelOption(value, "can't decide" if value == CANNOT_DECIDE else value.replace("_", " "), n)
        for n, value in enumerate(values, start=1)
    ]


@dataclass(frozen=True)
class ClaimRowContext:
    """One claim of the form: the claim, what the form holds for it, and its error if any."""

    claim: ClaimRow
    position: int
    state: ClaimState
    error: str | None
    differs: bool = False


@dataclass(frozen=True)
class FormErrors:
    """Where a service error goes: a claim row (by position), the answer, or the top."""

    general: str | None = None
    answer: str | None = None
    claims: Mapping[int, str] | None = None


def errors_from(exc: LabelingError) -> FormErrors:
    """Place a domain error next to the field it names (``exc.field``), else at the top."""
    field = exc.field or ""
    match = CLAIM_FIELD.match(field)
    if match:
        return FormErrors(claims={int(match.group(1)): exc.message})
    if field.startswith("answer_"):
        return FormErrors(answer=exc.message)
    return FormErrors(general=exc.message)


def state_from_vote(vote: Vote | None) -> LabelsState:
    """Return the form state of a stored vote (stored offsets are code points)."""
    if vote is None:
        return LabelsState()
    return LabelsState(
        answer_label=vote.answer_label or "",
        answer_reason=vote.answer_reason or "",
        comment=vote.comment,
        claims={
            claim_id: ClaimState(
                label=cv.label or "",
                reason=cv.reason or "",
                boundary_error=cv.boundary_error,
                evidence=[
                    EvidenceState(
                        source_version_id=str(span.source_version_id),
                        start=str(span.start),
                        end=str(span.end),
                        quote=span.quote,
                        unit="codepoint",
                    )
                    for span in cv.evidence
                ],
            )
            for claim_id, cv in vote.claims.items()
        },
    )


def form_context(
    *,
    question_text: str,
    candidate_text: str,
    claims: Sequence[ClaimRow],
    sources: Sequence[SourceRow],
    state: LabelsState,
    errors: FormErrors,
    answer_labels: Iterable[str],
    claim_labels: Iterable[str],
    reasons: Iterable[str],
    cannot_decide: bool,
    differing_claim_ids: Iterable[int] = (),
) -> dict[str, Any]:
    """Return the template context shared by ``annotate.html`` and ``adjudicate.html``."""
    differing = set(differing_claim_ids)
    claim_errors = errors.claims or {}
    return {
        "question_text": question_text,
        "segments": answer_segments(candidate_text, claims, key=lambda c: c.id),
        "claim_rows": [
            ClaimRowContext(
                claim=claim,
                position=position,
                state=state.claims.get(claim.id, ClaimState()),
                error=claim_errors.get(position),
                differs=claim.id in differing,
            )
            for position, claim in enumerate(claims)
        ],
        "unanchored": [c for c in claims if c.unanchored],
        "sources": sources,
        "source_labels": {s.id: s.document_key for s in sources},
        "state": state,
        "errors": errors,
        "answer_options": label_options(answer_labels, cannot_decide=cannot_decide),
        "claim_options": label_options(claim_labels, cannot_decide=cannot_decide),
        "reasons": list(reasons),
        "evidence_unavailable": EVIDENCE_UNAVAILABLE,
    }
