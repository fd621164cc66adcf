"""What a submission says, and the one check of its labels against the policy.

:class:`AnnotationInput` (with its :class:`ClaimInput` and :class:`EvidenceInput`) is what a page
or the API parses; :func:`labels_check` checks its labels against the project's labelling
policy plus ``cannot_decide`` and its evidence against the pinned source versions
(:mod:`labeling.offsets`), collects every problem (:class:`Problems`) and names each by its input
field, e.g. ``claims[2].evidence[0].quote`` (``InvalidInput.field``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from labeling import offsets
from labeling.exceptions import InvalidInput
from labeling.importers.record_errors import echo
from labeling.models import CANNOT_DECIDE, MAX_ID, Item, LabelPolicy, RetrievalLink, SourceVersion
from labeling.rows import select_rows
from labeling.vocabulary import EVIDENCE_UNAVAILABLE

MAX_EVIDENCE_PER_CLAIM = 50


@dataclass(frozen=True)
class EvidenceInput:
    """A cited span: offsets into a pinned source version, in ``unit``, and the selected text."""

    source_version_id: int
    start: int
    end: int
    quote: str
    unit: str = offsets.UNIT_UTF16


@dataclass(frozen=True)
class ClaimInput:
    """The label of one claim; ``reason`` only with ``evidence_unavailable``."""

    claim_id: int
    label: str
    reason: str | None = None
    boundary_error: bool = False
    evidence: tuple[EvidenceInput, ...] = ()


@dataclass(frozen=True)
class AnnotationInput:
    """One submit of the labelling form."""

    answer_label: str
    answer_reason: str | None = None
    claims: tuple[ClaimInput, ...] = ()
    comment: str = ""
    time_spent_seconds: float | None = None
    #: The revision number the labels were made on (``0``: before the first submit); a submit
    #: based on another revision than the current one is refused (``StaleVersion``). None: taken
    #: as 0, a first submit, so of two sessions that both submit first the second is refused
    #: rather than replacing the first unseen; a revision names the revision it replaces.
    based_on_revision: int | None = None
    #: The label policy version the form was loaded under; a submit made under another version
    #: than the project's current labelling policy is refused (``StaleVersion``). None: no
    #: precondition (the labels are checked against the current policy).
    policy_version: int | None = None


class CheckedEvidence(NamedTuple):
    """An evidence span that passed :func:`labels_check`, in code points.

    A plain tuple too, as :func:`labeling.services.claim_labels.claim_labels_write` takes spans.
    """

    source_version_id: int
    start: int
    end: int
    quote: str


@dataclass(frozen=True)
class CheckedClaim:
    """A claim label that passed :func:`labels_check` (evidence deduplicated and sorted)."""

    claim_id: int
    label: str
    reason: str | None
    boundary_error: bool
    evidence: tuple[CheckedEvidence, ...]
    #: The label needs evidence but was accepted without (``labels_check``'s ``waivers``).
    evidence_waived: bool = False


@dataclass(frozen=True)
class CheckedLabels:
    """Answer and claim labels that passed :func:`labels_check`."""

    answer_label: str
    answer_reason: str | None
    claims: tuple[CheckedClaim, ...]

    def canonical(self) -> dict[str, Any]:
        """Return the labels as canonical JSON-able data (claims by id, spans sorted)."""
        return {
            "answer_label": self.answer_label,
            "answer_reason": self.answer_reason,
            "claims": [
                {
                    "claim": c.claim_id,
                    "label": c.label,
                    "reason": c.reason,
                    "boundary_error": c.boundary_error,
                    "evidence": [
                        [e.source_version_id, e.start, e.end, e.quote] for e in c.evidence
                    ],
                }
                for c in self.claims
            ],
        }


class Problems:
    """The problems found in one submission, collected so that all are reported at once."""

    def __init__(self) -> None:
        self.items: list[dict[str, str]] = []

    def add(self, field: str, reason: str) -> None:
        """Record that ``field`` (e.g. ``claims[1].evidence``) is wrong for ``reason``."""
        self.items.append({"field": field, "reason": reason})

    def raise_any(self) -> None:
        """Raise one :class:`InvalidInput` listing every problem, if there is any.

        The error's ``field`` and ``reason`` are the first problem's (its message reads as
        before); ``data["errors"]`` lists all of them as ``{"field", "reason"}``, in input order.
        """
        if not self.items:
            return
        first = self.items[0]
        extra = f" (and {len(self.items) - 1} more)" if len(self.items) > 1 else ""
        raise InvalidInput(
            first["reason"] + extra,
            field=first["field"],
            data={"errors": [dict(p) for p in self.items]},
        )


def _check_label(
    label: Any,
    reason: Any,
    allowed: Sequence[str],
    reasons: Sequence[str],
    fields: tuple[str, str],
    problems: Problems,
    *,
    allow_cannot_decide: bool,
) -> tuple[str, str | None] | None:
    """Check one label and its reason; return (label, reason or None), or None if wrong.

    ``fields`` names the label's and the reason's input fields; problems go to ``problems``.
    """
    field, reason_field = fields
    choices = [*allowed, CANNOT_DECIDE] if allow_cannot_decide else list(allowed)
    if not isinstance(label, str) or label not in choices:
        problems.add(field, f"{echo(label)} is not one of {choices}")
        return None
    if reason == "":
        reason = None
    if label == EVIDENCE_UNAVAILABLE:
        if reason is None:
            problems.add(reason_field, f"{label} needs a reason, one of {list(reasons)}")
            return None
        if not isinstance(reason, str) or reason not in reasons:
            problems.add(reason_field, f"{echo(reason)} is not one of {list(reasons)}")
            return None
    elif reason is not None:
        problems.add(reason_field, f"a reason is given only with {EVIDENCE_UNAVAILABLE}")
        return None
    return label, reason


def labels_check(
    *,
    item: Item,
    policy: LabelPolicy,
    answer_label: Any,
    answer_reason: Any,
    claims: Sequence[ClaimInput],
    allow_cannot_decide: bool,
    waivers: Mapping[int, Collection[str]] | None = None,
) -> CheckedLabels:
    """Check answer and claim labels of ``item`` against ``policy`` and the pinned sources.

    Rules: labels from the policy (plus ``cannot_decide`` when allowed); a reason from the
    policy's unavailable reasons iff the label is ``evidence_unavailable``; every claim of the
    candidate labelled exactly once and no other claim; the policy's evidence labels
    (``evidence_labels``, by default ``supported`` and ``contradicted``) cite at least one
    span, unless ``waivers`` (claim id -> labels) waives it for that claim and label (the
    checked claim then says ``evidence_waived``); every span from a source version pinned to
    the item's question, passing
    :func:`labeling.offsets.evidence_span_check`. Identical spans cited twice for one claim are
    kept once. Reads the item's claims and the cited source versions (two queries).

    Every problem of the submission is found before anything is refused, so that a person
    can fix them all in one go.

    Raises:
        InvalidInput: naming the first problem's field (e.g. ``claims[1].evidence[0].quote``);
            ``data["errors"]`` lists every problem as ``{"field", "reason"}``.
    """
    problems = Problems()
    answer = _check_label(
        answer_label,
        answer_reason,
        policy.answer_labels,
        policy.unavailable_reasons,
        ("answer_label", "answer_reason"),
        problems,
        allow_cannot_decide=allow_cannot_decide,
    )
    # Every submit reads them: one plain statement (labeling/rows.py).
    claim_ids = dict(
        select_rows(
            'SELECT id, "index" FROM labeling_claim WHERE candidate_id = %s', [item.candidate_id]
        )
    )
    cited = {
        e.source_version_id
        for c in claims
        if isinstance(c, ClaimInput)
        for e in c.evidence
        if isinstance(e, EvidenceInput)
        and isinstance(e.source_version_id, int)
        # An id beyond the database's range cannot be pinned (and SQLite would overflow).
        and 0 < e.source_version_id <= MAX_ID
    }
    # No query (nor its construction) when nothing is cited, as in most submits.
    pinned: Mapping[int, SourceVersion] = (
        {
            link.source_version_id: link.source_version
            for link in RetrievalLink.objects.filter(
                question__candidates=item.candidate_id, source_version_id__in=cited
            ).select_related("source_version")
        }
        if cited
        else {}
    )
    evidence_required = frozenset(policy.evidence_labels or ())
    checked: dict[int, CheckedClaim] = {}
    seen: set[Any] = set()
    for i, claim in enumerate(claims):
        at = f"claims[{i}]"
        if not isinstance(claim, ClaimInput):
            problems.add(at, "expected a claim label")
            continue
        if claim.claim_id not in claim_ids:
            problems.add(
                f"{at}.claim_id", f"claim {echo(claim.claim_id)} is not a claim of this item"
            )
            continue
        if claim.claim_id in seen:
            problems.add(f"{at}.claim_id", f"claim {claim.claim_id} is labelled twice")
            continue
        seen.add(claim.claim_id)
        checked_label = _check_label(
            claim.label,
            claim.reason,
            policy.claim_labels,
            policy.unavailable_reasons,
            (f"{at}.label", f"{at}.reason"),
            problems,
            allow_cannot_decide=allow_cannot_decide,
        )
        valid = checked_label is not None
        if not isinstance(claim.boundary_error, bool):
            problems.add(f"{at}.boundary_error", "expected true or false")
            valid = False
        if len(claim.evidence) > MAX_EVIDENCE_PER_CLAIM:
            problems.add(f"{at}.evidence", f"at most {MAX_EVIDENCE_PER_CLAIM} spans per claim")
            continue
        spans: dict[tuple[int, int, int], CheckedEvidence] = {}
        spans_valid = True
        for j, evidence in enumerate(claim.evidence):
            where = f"{at}.evidence[{j}]"
            version = pinned.get(evidence.source_version_id)
            if version is None:
                problems.add(
                    f"{where}.source_version_id",
                    f"source version {echo(evidence.source_version_id)} is not a pinned source of "
                    "this item's question",
                )
                spans_valid = False
                continue
            try:
                start, end = offsets.evidence_span_check(
                    text=version.text,
                    sha256=version.sha256,
                    start=evidence.start,
                    end=evidence.end,
                    quote=evidence.quote,
                    unit=evidence.unit,
                )
            except InvalidInput as exc:
                name = exc.field or "quote"
                name = "source_version_id" if name == "source" else name
                problems.add(f"{where}.{name}", exc.reason)
                spans_valid = False
                continue
            key = (version.pk, start, end)
            spans[key] = CheckedEvidence(version.pk, start, end, evidence.quote)
        if checked_label is None or not valid or not spans_valid:
            continue
        label, reason = checked_label
        waived = False
        if label in evidence_required and not spans:
            waived = label in (waivers or {}).get(claim.claim_id, ())
            if not waived:
                problems.add(f"{at}.evidence", f"{label} needs at least one evidence span")
                continue
        checked[claim.claim_id] = CheckedClaim(
            claim_id=claim.claim_id,
            label=label,
            reason=reason,
            boundary_error=claim.boundary_error,
            evidence=tuple(spans[k] for k in sorted(spans)),
            evidence_waived=waived,
        )
    missing = sorted(set(claim_ids) - seen, key=lambda pk: claim_ids[pk])
    if missing:
        shown = ", ".join(f"claim {pk} (index {claim_ids[pk]})" for pk in missing[:5])
        problems.add("claims", f"every claim needs a label; missing: {shown}")
    problems.raise_any()
    assert answer is not None  # no problem was recorded, so the answer label passed
    return CheckedLabels(
        answer_label=answer[0],
        answer_reason=answer[1],
        claims=tuple(checked[pk] for pk in sorted(checked, key=lambda pk: claim_ids[pk])),
    )
