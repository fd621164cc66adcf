"""Shared page model of the labelling and adjudication forms (claims, labels, evidence chips)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from labeling.exceptions import LabelingError
from labeling.forms import ClaimState, EvidenceState, LabelsState
from labeling.models import CANNOT_DECIDE
from labeling.selectors.policies import CANNOT_DECIDE_KEY, LabelChoice, ReasonChoice
from labeling.selectors.review import ClaimRow, PolicyVocabularyView, SourceRow
from labeling.selectors.vote_reads import Vote
from labeling.views.catalog import answer_segments
from labeling.views.problems import PROBLEM_WORDS, PageProblem, label_words, problems_of
from labeling.vocabulary import EVIDENCE_UNAVAILABLE

# Claims are told apart by colour: rows [data-colour=N] and ev-N highlights (workbench.css).
CLAIM_COLOURS = 6


@dataclass(frozen=True)
class LabelOption:
    """A radio button: its value, its words, its keyboard shortcut and its definition.

    ``key`` is the policy's one-character shortcut (digits by default; "0" for "can't
    decide"). ``description`` is the policy's definition of the label ("" when it gives none);
    pages show it as the option's hint (``title`` and ``aria-describedby`` of ``hint_id``).
    """

    value: str
    text: str
    key: str
    description: str = ""

    @property
    def hint_id(self) -> str:
        """The id of the element holding the definition (one per label and page)."""
        return f"label-hint-{self.value}"


def label_options(choices: Iterable[LabelChoice], *, cannot_decide: bool) -> list[LabelOption]:
    """Return the radio options of a label group, "can't decide" last when offered.

    Args:
        choices: the policy's labels at one level, in the policy's order, with their words,
            keys and definitions (:func:`labeling.selectors.policies.policy_label_choices`).
        cannot_decide: offer "can't decide" (key ``0``) as the last option.
    """
    options = [LabelOption(c.value, c.text, c.key, c.description) for c in choices]
    if cannot_decide:
        options.append(LabelOption(CANNOT_DECIDE, label_words(CANNOT_DECIDE), CANNOT_DECIDE_KEY))
    return options


@dataclass(frozen=True)
class ClaimRowContext:
    """One claim of the form: the claim, what the form holds for it, and its error if any."""

    claim: ClaimRow
    position: int
    state: ClaimState
    error: str | None
    differs: bool = False
    errors: tuple[str, ...] = ()

    @property
    def colour(self) -> int:
        """The claim's colour on the page (0-5, by position): its row and its cited spans."""
        return self.position % CLAIM_COLOURS


@dataclass(frozen=True)
class FormErrors:
    """Where the problems of a refused submit go: claim rows (by position), the answer, the top.

    ``general``, ``answer`` and ``claims`` hold the sentences shown at each place (several
    joined by a space); ``problems`` lists every problem, in the page's words, for the summary.
    """

    general: str | None = None
    answer: str | None = None
    claims: Mapping[int, str] | None = None
    problems: tuple[PageProblem, ...] = field(default_factory=tuple)

    @property
    def summary(self) -> tuple[PageProblem, ...]:
        """The problems to list in the summary (all of them when there are two or more)."""
        return self.problems if len(self.problems) > 1 else ()

    def claim_texts(self, position: int) -> tuple[str, ...]:
        """The sentences shown next to the claim at ``position``."""
        return tuple(
            p.text for p in self.problems if p.target == "claim" and p.claim_position == position
        )


def _joined(texts: Iterable[str]) -> str | None:
    return " ".join(texts) or None


def errors_from(
    exc: LabelingError,
    *,
    state: LabelsState | None = None,
    claim_ids: Sequence[int] = (),
    claim_names: Sequence[str] = (),
    field_names: Mapping[str, tuple[str, str]] | None = None,
) -> FormErrors:
    """Place every problem of a domain error next to its field, in the page's words.

    Args:
        exc: the refused submit's error; ``exc.data["errors"]`` lists every problem (else the
            error's own field and reason is the one problem).
        state: what the form sent (the words depend on it, e.g. which label lacks evidence);
            None words the problems as for an empty form.
        claim_ids: the claims' ids in page order.
        claim_names: the claims' names on the page by position (default "Claim <n>").
        field_names: the page's other fields, ``{field: (target, where)}``
            (see :func:`labeling.views.problems.problems_in_words`).
    """
    problems = tuple(
        problems_of(
            exc,
            state=state or LabelsState(),
            claim_ids=claim_ids,
            claim_names=claim_names,
            field_names=field_names,
        )
    )
    claims: dict[int, list[str]] = {}
    for problem in problems:
        if problem.target == "claim" and problem.claim_position is not None:
            claims.setdefault(problem.claim_position, []).append(problem.text)
    return FormErrors(
        general=_joined(p.message for p in problems if p.target in {"general", "comment"}),
        answer=_joined(p.text for p in problems if p.target == "answer"),
        claims={position: " ".join(texts) for position, texts in claims.items()},
        problems=problems,
    )


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
    answer_choices: Sequence[LabelChoice],
    claim_choices: Sequence[LabelChoice],
    reason_choices: Sequence[ReasonChoice],
    evidence_labels: Iterable[str],
    cannot_decide: bool,
    differing_claim_ids: Iterable[int] = (),
) -> dict[str, Any]:
    """Return the template context shared by ``annotate.html`` and ``adjudicate.html``.

    The choices are the policy's (:mod:`labeling.selectors.policies`): the options' words,
    keys and definitions (shown as hints), the reasons' words, and ``evidence_labels``, the
    claim labels that must cite evidence (the page script checks them before sending); sources are
    named by :func:`source_labels`; ``problem_words`` are the sentences the page script uses
    for the problems it finds before submitting (:data:`labeling.views.problems.PROBLEM_WORDS`).
    """
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
                errors=errors.claim_texts(position),
            )
            for position, claim in enumerate(claims)
        ],
        "unanchored": [c for c in claims if c.unanchored],
        "sources": sources,
        "source_labels": source_labels(sources),
        "state": state,
        "errors": errors,
        "answer_options": label_options(answer_choices, cannot_decide=cannot_decide),
        "claim_options": label_options(claim_choices, cannot_decide=cannot_decide),
        "reasons": list(reason_choices),
        "evidence_unavailable": EVIDENCE_UNAVAILABLE,
        "label_texts": label_texts(answer_choices, claim_choices, reason_choices),
        "problem_words": PROBLEM_WORDS,
        "page_rules": {
            "evidence_required": sorted(evidence_labels),
            "evidence_unavailable": EVIDENCE_UNAVAILABLE,
        },
        "label_definitions": _definitions(
            label_options(claim_choices, cannot_decide=False)
            + label_options(answer_choices, cannot_decide=False)
        ),
    }


def label_texts(*choices: Iterable[LabelChoice | ReasonChoice]) -> dict[str, str]:
    """Return the policy's display text of each label and reason token, and "can't decide".

    For the ``label_text`` template filter, which words a token the policy does not name (an
    imported vote's, an older version's) as :func:`labeling.views.problems.label_words` does.
    The answer level's text wins when a token is a label at both levels.
    """
    texts = {CANNOT_DECIDE: label_words(CANNOT_DECIDE)}
    for group in reversed(choices):
        texts.update((choice.value, choice.text) for choice in group)
    return texts


def _definitions(options: Iterable[LabelOption]) -> list[LabelOption]:
    """The options that have a definition, each label once."""
    seen: set[str] = set()
    found = []
    for option in options:
        if option.description and option.value not in seen:
            seen.add(option.value)
            found.append(option)
    return found


def guideline_context(policy: PolicyVocabularyView) -> dict[str, Any]:
    """Return the context of ``labeling/_guideline.html`` for a policy: its text and version."""
    return {"guideline": policy.guideline, "guideline_version": policy.version}


def source_labels(sources: Sequence[SourceRow]) -> dict[int, str]:
    """Return each source's short name on the page, by source version id: "Source N".

    N counts the sources in page order from 1. Sources store no title of their own, and their
    document keys are often hashes ("faithbench-source:2a0cb26b41b05662") that tell a reader
    nothing; the page heads each source with its URI, else its first words.
    """
    return {source.id: f"Source {n}" for n, source in enumerate(sources, start=1)}
