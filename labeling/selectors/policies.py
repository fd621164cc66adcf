"""Reads of a label policy: its labels per level with text, description, key and evidence rule.

A policy stores its label values in order (``answer_labels``, ``claim_labels``,
``unavailable_reasons``) and, beside them, what people see of each (``label_details``,
``reason_texts``) and which claim labels must cite evidence (``evidence_labels``). A detail a
policy does not store takes the default below, so a policy made before details existed (or
restored from a release) reads as the default policy's labels.

Shortcut keys are single characters, unique per level. ``0`` is the key of "can't decide" when
a form offers it; ``j``, ``k``, ``c``, ``b`` and ``s`` are the labelling page's own shortcuts
(next/previous claim, cite, boundary error, submit); a policy uses neither.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from labeling import vocabulary
from labeling.models import LabelPolicy

Level = Literal["answer", "claim"]
LEVELS: tuple[Level, ...] = ("answer", "claim")

# The fixed schema: the labels each level may offer, in their default order. A policy may leave
# labels out but never adds a value; ``evidence_unavailable`` keeps its meaning everywhere.
SCHEMA: Mapping[Level, tuple[str, ...]] = {
    "answer": vocabulary.DEFAULT_ANSWER_LABELS,
    "claim": vocabulary.DEFAULT_CLAIM_LABELS,
}
REASONS: tuple[str, ...] = ("not_found", "blocked", "source_changed")
# Claim labels that may be made to cite evidence (evidence_unavailable judges nothing).
CITABLE: frozenset[str] = frozenset(
    {vocabulary.SUPPORTED, vocabulary.CONTRADICTED, vocabulary.NOT_SUPPORTED}
)
CANNOT_DECIDE_KEY = "0"
# The labelling and adjudication pages' own keys (labeling/static/labeling/annotate.js and
# adjudicate.js): move (j k), cite (c), remove a citation (x), boundary (b), reason (r), submit
# (s), undo a skip (u), revise the previous item (p), guideline (g), next item (n), use a vote
# (u, a), rationale (w); on every project page (labeling/static/labeling/keys.js) next item (n)
# and the queue (q). A label's key never shadows one of them.
PAGE_KEYS: frozenset[str] = frozenset("abcgjknpqrsuwx")
RESERVED_KEYS: frozenset[str] = PAGE_KEYS | {CANNOT_DECIDE_KEY}

# A default label's text is its name, spaces for underscores ("not supported"); can't decide's
# is its own.
DEFAULT_TEXTS: Mapping[str, str] = {
    **{
        label: label.replace("_", " ")
        for label in (
            vocabulary.ADMISSIBLE,
            vocabulary.INADMISSIBLE,
            vocabulary.ABSTAINED,
            vocabulary.SUPPORTED,
            vocabulary.CONTRADICTED,
            vocabulary.NOT_SUPPORTED,
            vocabulary.EVIDENCE_UNAVAILABLE,
        )
    },
    vocabulary.CANNOT_DECIDE: "can't decide",
}
DEFAULT_DESCRIPTIONS: Mapping[Level, Mapping[str, str]] = {
    "answer": {
        vocabulary.ADMISSIBLE: "The answer may be accepted as it stands: it answers the "
        "question and nothing in it is unsupported or wrong in a way that matters.",
        vocabulary.INADMISSIBLE: "The answer must not be accepted: it states something the "
        "evidence does not back or contradicts, or it does not answer the question.",
        vocabulary.ABSTAINED: 'The answer declines to answer (e.g. "I don\'t know") instead '
        "of answering.",
        vocabulary.EVIDENCE_UNAVAILABLE: "The answer cannot be judged because the evidence "
        "cannot be read; choose the reason.",
    },
    "claim": {
        vocabulary.SUPPORTED: "The evidence states the claim or directly implies it.",
        vocabulary.CONTRADICTED: "The evidence states the opposite of the claim, or something "
        "incompatible with it.",
        vocabulary.NOT_SUPPORTED: "The evidence neither supports nor contradicts the claim.",
        vocabulary.EVIDENCE_UNAVAILABLE: "The claim cannot be judged because the evidence "
        "cannot be read; choose the reason.",
    },
}
DEFAULT_REASON_TEXTS: Mapping[str, str] = {
    "not_found": "source not found",
    "blocked": "source blocked (paywall, login, robot check)",
    "source_changed": "source changed since it was pinned",
}


@dataclass(frozen=True)
class LabelChoice:
    """One label a level offers: value, display text, description, shortcut key, evidence rule.

    ``key`` is one character; ``requires_evidence`` is True for a claim label that must cite
    at least one evidence span (always False at the answer level and for "can't decide").
    """

    value: str
    text: str
    description: str
    key: str
    requires_evidence: bool = False


@dataclass(frozen=True)
class ReasonChoice:
    """One reason for ``evidence_unavailable`` the policy offers: value and display text."""

    value: str
    text: str


def default_key(position: int) -> str:
    """Return the default shortcut key of the label at 0-based ``position``: "1", "2", ..."""
    return str(position + 1)


def _detail(policy: LabelPolicy, level: Level, label: str) -> Mapping[str, Any]:
    details = policy.label_details if isinstance(policy.label_details, dict) else {}
    by_level = details.get(level)
    entry = by_level.get(label) if isinstance(by_level, dict) else None
    return entry if isinstance(entry, dict) else {}


def policy_labels(policy: LabelPolicy, level: Level) -> list[str]:
    """Return the label values ``policy`` offers at ``level`` ("answer" or "claim"), in order."""
    return list(policy.answer_labels if level == "answer" else policy.claim_labels)


def policy_label_choices(
    policy: LabelPolicy, level: Level, *, cannot_decide: bool = False
) -> list[LabelChoice]:
    """Return the labels ``policy`` offers at ``level``, in the policy's order.

    ``cannot_decide`` appends "can't decide" (key ``0``, no policy description) for forms that
    accept it as a vote. Details the policy does not store take the defaults (text from the
    value, the default description, key = 1-based position).
    """
    evidence = set(policy.evidence_labels or ()) if level == "claim" else set()
    choices = []
    for position, value in enumerate(policy_labels(policy, level)):
        detail = _detail(policy, level, value)
        choices.append(
            LabelChoice(
                value=value,
                text=str(detail.get("text") or DEFAULT_TEXTS.get(value, value.replace("_", " "))),
                description=str(
                    detail.get("description", DEFAULT_DESCRIPTIONS[level].get(value, ""))
                ),
                key=str(detail.get("key") or default_key(position)),
                requires_evidence=value in evidence,
            )
        )
    if cannot_decide:
        choices.append(
            LabelChoice(
                value=vocabulary.CANNOT_DECIDE,
                text=DEFAULT_TEXTS[vocabulary.CANNOT_DECIDE],
                description="You cannot decide between the labels; the item goes to an "
                "adjudicator.",
                key=CANNOT_DECIDE_KEY,
            )
        )
    return choices


def policy_reason_choices(policy: LabelPolicy) -> list[ReasonChoice]:
    """Return the reasons ``policy`` offers for ``evidence_unavailable``, in order, with text."""
    texts = policy.reason_texts if isinstance(policy.reason_texts, dict) else {}
    return [
        ReasonChoice(value, str(texts.get(value) or DEFAULT_REASON_TEXTS.get(value, value)))
        for value in policy.unavailable_reasons
    ]


def policy_evidence_labels(policy: LabelPolicy) -> frozenset[str]:
    """Return the claim labels of ``policy`` that must cite at least one evidence span."""
    return frozenset(policy.evidence_labels or ())


def description_rows(
    level: Level, labels: Sequence[LabelChoice], reasons: Sequence[ReasonChoice]
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Return ``labels`` and ``reasons`` as the JSON rows of a policy description.

    A label row is ``{"value", "text", "description", "key"}``, plus ``"requires_evidence"`` at
    the claim level; a reason row ``{"value", "text"}``.
    """
    rows = []
    for choice in labels:
        row: dict[str, Any] = {
            "value": choice.value,
            "text": choice.text,
            "description": choice.description,
            "key": choice.key,
        }
        if level == "claim":
            row["requires_evidence"] = choice.requires_evidence
        rows.append(row)
    return rows, [{"value": r.value, "text": r.text} for r in reasons]


def policy_description_data(policy: LabelPolicy) -> dict[str, Any]:
    """Return the full editable description of ``policy`` as JSON-ready data.

    Shape (the one :func:`labeling.services.policies.policy_description_check` accepts)::

        {"evidence_relation": str, "guideline": str (Markdown),
         "answer_labels": [{"value", "text", "description", "key"}],
         "claim_labels": [{"value", "text", "description", "key", "requires_evidence"}],
         "unavailable_reasons": [{"value", "text"}],
         "gold_rate": float, "qualification_required": bool, "qualification_items": int,
         "qualification_threshold": float,
         "answer_scale": str, "claim_scale": str}  (LabelScale values)
    """
    reasons = policy_reason_choices(policy)
    answer, reason_rows = description_rows(
        "answer", policy_label_choices(policy, "answer"), reasons
    )
    claim, _ = description_rows("claim", policy_label_choices(policy, "claim"), ())
    return {
        "evidence_relation": policy.evidence_relation,
        "guideline": policy.guideline,
        "answer_labels": answer,
        "claim_labels": claim,
        "unavailable_reasons": reason_rows,
        "gold_rate": policy.gold_rate,
        "qualification_required": policy.qualification_required,
        "qualification_items": policy.qualification_items,
        "qualification_threshold": policy.qualification_threshold,
        "answer_scale": policy.answer_scale,
        "claim_scale": policy.claim_scale,
    }
