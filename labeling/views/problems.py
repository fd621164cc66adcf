"""The problems of a refused labels submission, in the words of the page that sent it.

A service names every problem by a field path and a reason (``InvalidInput.data["errors"]``,
e.g. ``{"field": "claims[1].evidence", "reason": "supported needs at least one evidence
span"}``). :func:`problems_in_words` turns them into sentences a person can act on ("Claim 2 —
'supported' needs evidence: select text in a source and press c"), each placed next to its field.
The labelling and the adjudication pages use it for their HTML answers and their JSON answers;
their scripts check the same rules before submitting with the same sentences
(:data:`PROBLEM_WORDS`, handed to the script as JSON).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from labeling.exceptions import LabelingError
from labeling.forms import ClaimState, LabelsState
from labeling.models import CANNOT_DECIDE
from labeling.vocabulary import EVIDENCE_REQUIRED, EVIDENCE_UNAVAILABLE

#: Sentences of the problems a page script finds before submitting, and the server's alike.
#: ``{label}`` is a label in words; ``{n}`` a 1-based evidence number; ``{reason}`` the
#: service's reason, shown as written where no sentence of the page fits.
PROBLEM_WORDS: dict[str, str] = {
    "label_missing": "choose a label",
    "label_unknown": "'{label}' is not a label of this policy: choose one of the labels shown",
    "reason_missing": "'{label}' needs a reason: choose why the evidence is unavailable",
    "reason_unknown": "choose one of the reasons listed",
    "reason_unexpected": "a reason is given only with 'evidence unavailable': clear the reason",
    "evidence_missing": "'{label}' needs evidence: select text in a source and press c",
    "evidence_mismatch": (
        "evidence {n} no longer matches its source text: remove it and cite the text again"
    ),
    "evidence_foreign": "evidence {n} is not from a source of this item: remove it",
    "claim_unknown": "this claim is not part of the item: reload the page",
    "claims_missing": "every claim needs a label: reload the page and label each claim",
    "other": "{reason}",
}

_CLAIM = re.compile(r"^claims\[(\d+)\](?:\.(\w+))?(?:\[(\d+)\](?:\.(\w+))?)?$")


def label_words(value: str) -> str:
    """Return a label or reason token as the page says it (``not_found`` → "not found")."""
    return "can't decide" if value == CANNOT_DECIDE else value.replace("_", " ")


@dataclass(frozen=True)
class PageProblem:
    """One problem, placed and worded for the page.

    Attributes:
        field: the service's field path, e.g. ``claims[1].evidence`` ("" when none).
        target: where the page shows it: ``claim`` (with ``claim_position``), ``answer``,
            ``comment``, or ``general`` (the top of the form).
        claim_position: the claim's 0-based position in the page's claim order, or None.
        where: the field's name on the page, e.g. "Claim 2" ("" for the form as a whole).
        text: the sentence shown next to the field, e.g. "'supported' needs evidence: ...".
    """

    field: str
    target: str
    claim_position: int | None
    where: str
    text: str

    @property
    def message(self) -> str:
        """The sentence of the summary: ``"<where> — <text>"``."""
        return f"{self.where} — {self.text}" if self.where else self.text

    def as_json(self) -> dict[str, Any]:
        """Return the problem as a JSON answer carries it (the attributes and ``message``)."""
        return {
            "field": self.field,
            "target": self.target,
            "claim_position": self.claim_position,
            "where": self.where,
            "text": self.text,
            "message": self.message,
        }


def _words(kind: str, **values: object) -> str:
    return PROBLEM_WORDS[kind].format(**values)


def _label_problem(name: str, label: str, reason: str, service_reason: str) -> str:
    """The sentence of a label (``name`` "label") or reason field's problem.

    ``label`` and ``reason`` are what the form sent; the service's reason is shown only when
    none of the page's sentences fits.
    """
    if name == "label":
        return (
            _words("label_unknown", label=label_words(label)) if label else _words("label_missing")
        )
    if label == EVIDENCE_UNAVAILABLE:
        return (
            _words("reason_unknown")
            if reason
            else _words("reason_missing", label=label_words(label))
        )
    if reason:
        return _words("reason_unexpected")
    return _words("other", reason=service_reason)


def _claim_problem(match: re.Match[str], claim: ClaimState, service_reason: str) -> str:
    name, index, leaf = match.group(2), match.group(3), match.group(4)
    if name in {"label", "reason"}:
        return _label_problem(name, claim.label, claim.reason, service_reason)
    if name == "evidence" and index is not None:
        kind = "evidence_foreign" if leaf == "source_version_id" else "evidence_mismatch"
        return _words(kind, n=int(index) + 1)
    if name == "evidence" and claim.label in EVIDENCE_REQUIRED and not claim.evidence:
        return _words("evidence_missing", label=label_words(claim.label))
    if name == "claim_id":
        return _words("claim_unknown")
    return _words("other", reason=service_reason)


def problems_in_words(
    errors: Sequence[Mapping[str, Any]],
    *,
    state: LabelsState,
    claim_ids: Sequence[int],
    claim_names: Sequence[str] = (),
    field_names: Mapping[str, tuple[str, str]] | None = None,
    as_written: bool = False,
) -> list[PageProblem]:
    """Word and place every problem of a refused submission, in the order given.

    The words follow from the field path and what the form sent (``state``): a label field
    of a claim sent without a label is "choose a label", an evidence field of a ``supported``
    claim sent without evidence is "'supported' needs evidence: ...". The service's reason is
    shown as written only where no sentence of the page fits.

    Args:
        errors: ``[{"field": "claims[1].evidence", "reason": "..."}]`` as a service lists them
            (``InvalidInput.data["errors"]``); a missing field is ``""``.
        state: what the form sent.
        claim_ids: the claims' ids in page order (``claims[i]`` is ``claim_ids[i]``).
        claim_names: the claims' names on the page by position; default "Claim <i + 1>".
        field_names: the page's own fields besides the labels, as ``{field: (target, where)}``,
            e.g. ``{"unresolved_reason": ("general", "Decision")}``; their reason is shown as
            the service wrote it.
        as_written: place the problems but keep the service's words, ``"<field>: <reason>"``
            (for an error that is not a labels check, e.g. a field a browser never sends twice
            sent twice).
    """
    extra = field_names or {}
    problems: list[PageProblem] = []
    for error in errors:
        field = str(error.get("field") or "")
        reason = str(error.get("reason") or "")
        match = _CLAIM.match(field)
        if match:
            position = int(match.group(1))
            where = (
                claim_names[position] if position < len(claim_names) else f"Claim {position + 1}"
            )
            claim_id = claim_ids[position] if position < len(claim_ids) else None
            claim = (
                state.claims.get(claim_id, ClaimState()) if claim_id is not None else ClaimState()
            )
            text = f"{field}: {reason}" if as_written else _claim_problem(match, claim, reason)
            problems.append(PageProblem(field, "claim", position, where, text))
        elif field in {"answer_label", "answer_reason"}:
            name = "label" if field == "answer_label" else "reason"
            text = (
                f"{field}: {reason}"
                if as_written
                else _label_problem(name, state.answer_label, state.answer_reason, reason)
            )
            problems.append(PageProblem(field, "answer", None, "The answer", text))
        elif field == "claims":
            problems.append(PageProblem(field, "general", None, "", _words("claims_missing")))
        elif field == "comment":
            text = f"{field}: {reason}" if as_written else reason
            problems.append(PageProblem(field, "comment", None, "Comment", text))
        elif field in extra:
            target, where = extra[field]
            problems.append(PageProblem(field, target, None, where, reason))
        else:
            # A field the page does not name: the service's own words, naming the field.
            problems.append(
                PageProblem(field, "general", None, "", f"{field}: {reason}" if field else reason)
            )
    return problems


def problems_of(
    exc: LabelingError,
    *,
    state: LabelsState,
    claim_ids: Sequence[int],
    claim_names: Sequence[str] = (),
    field_names: Mapping[str, tuple[str, str]] | None = None,
) -> list[PageProblem]:
    """Return every problem of a domain error in the page's words.

    ``exc.data["errors"]`` (every problem, as :func:`labeling.services.label_checks.labels_check`
    lists them) when present, worded by the page; else the error's own field and reason,
    placed by its field and kept as written. The other arguments are
    :func:`problems_in_words`'s.
    """
    listed = exc.data.get("errors")
    checked = isinstance(listed, list) and bool(listed)
    errors: list[Mapping[str, Any]] = (
        list(listed)
        if isinstance(listed, list) and listed
        else [{"field": exc.field or "", "reason": exc.reason}]
    )
    return problems_in_words(
        errors,
        as_written=not checked,
        state=state,
        claim_ids=claim_ids,
        claim_names=claim_names,
        field_names=field_names,
    )


__all__ = [
    "PROBLEM_WORDS",
    "PageProblem",
    "label_words",
    "problems_in_words",
    "problems_of",
]
