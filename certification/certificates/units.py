"""Records of the inputs snapshot: candidate losses, prepared questions and eligible units.

A *unit* is one eligible question with the answer the declared selector emits (the mode, the
flagged answer, the first sample), or, with the ``each_candidate`` selector, every candidate of
every question. Its 0/1 loss comes from the candidate's resolved label under the declared
counting policy: ``unresolved``, ``evidence_unavailable``, ``abstained`` and not-yet-resolved
(``pending``) outcomes count as errors or are excluded, as the spec says; exclusions are counted
and reported, never silent. A unit without an answer (no sample, nothing selected) is never
accepted. A missing score is never accepted either (counted as ``missing_score``). With a
bounded loss (selective risk only) each unit also carries that loss in [0, 1]
(:func:`candidate_bounded_loss`), under the same counting policy.

A question is *prepared* for conformal sets: its answers (in sample order, cut by the declared
Hoeffding stopping rule when there is one) are canonicalised and ranked by frequency with the
declared tie rule; a class is admissible when every one of its samples has loss 0 (a class whose
samples disagree is counted and treated as inadmissible, which can only enlarge the sets).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from certification.certificates.contract import POLICY_FIELDS, Contract
from certification.stats.conformal import (
    FrequencyProfile,
    TieRule,
    frequency_profile,
    rank_score,
    sequential_stop,
)
from certification.stats.errors import StatsError
from labeling.vocabulary import ADMISSIBLE, EVIDENCE_UNAVAILABLE, PENDING, SUPPORTED


# -- outcomes and losses ----------------------------------------------------------------------
def candidate_loss(
    candidate: Mapping[str, Any], contract: Contract
) -> tuple[int | None, str | None]:
    """Return the 0/1 loss of one candidate under the contract, or (None, reason) when excluded.

    ``pending``, ``unresolved``, ``evidence_unavailable`` and ``abstained`` outcomes follow the
    declared policy (error = loss 1, exclude = reason). ``admissible`` is 0; ``inadmissible``
    and any other label are 1. With the ``any_error`` loss an admissible answer with a claim
    that is not ``supported`` is 1 (claims labelled ``evidence_unavailable`` are skipped when
    that outcome is excluded). Returns ``(loss, None)``, or ``(None, outcome)`` when excluded.
    """
    outcome = candidate["outcome"]
    if outcome in POLICY_FIELDS:
        if contract.policies[POLICY_FIELDS[outcome]] == "exclude":
            return None, outcome
        return 1, None
    if outcome != ADMISSIBLE:
        return 1, None
    if contract.loss == "any_error":
        for label, count in candidate.get("claims", {}).items():
            if label == SUPPORTED or not count:
                continue
            if label == EVIDENCE_UNAVAILABLE and contract.policies["evidence_unavailable_as"] == (
                "exclude"
            ):
                continue
            return 1, None
    return 0, None


def _field_loss(candidate: Mapping[str, Any], field: str) -> float:
    """The ``candidate_field`` loss of a candidate, refused unless a number in [0, 1]."""
    value = candidate.get("loss_value")
    where = f"candidate {candidate['id']} (item {candidate['item']}): loss field {field!r}"
    if value is None:
        raise StatsError(f"{where} is missing (a bounded loss needs a number in [0, 1])")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise StatsError(f"{where} must be a number in [0, 1], got {value!r}")
    number = float(value)
    if not (math.isfinite(number) and 0.0 <= number <= 1.0):
        raise StatsError(f"{where} = {value!r} is outside [0, 1]")
    return number


def candidate_bounded_loss(
    candidate: Mapping[str, Any], contract: Contract
) -> tuple[float | None, str | None]:
    """Return the bounded loss in [0, 1] of one candidate, or (None, reason) when excluded.

    ``pending``, ``unresolved``, ``evidence_unavailable`` and ``abstained`` outcomes follow the
    declared policy, as for 0/1 losses (error = loss 1, exclude = reason). A resolved answer
    (any other label) takes:

    * ``unsupported_claim_share``: the share of its assessed claims whose resolved label is not
      ``supported`` (:func:`claim_counts`; claims labelled ``evidence_unavailable`` are left out
      when that outcome is excluded); with no assessed claim, its answer label decides: 0 if
      admissible, else 1;
    * ``candidate_field``: the declared candidate field's value.

    Raises:
        StatsError: a ``candidate_field`` value is missing, not a number or outside [0, 1]; the
            message names the candidate, its item and the field.
    """
    outcome = candidate["outcome"]
    if outcome in POLICY_FIELDS:
        if contract.policies[POLICY_FIELDS[outcome]] == "exclude":
            return None, outcome
        return 1.0, None
    if contract.loss == "candidate_field":
        return _field_loss(candidate, contract.loss_field), None
    assessed, unsupported, _ = claim_counts(candidate, contract)
    if assessed == 0:
        return (0.0 if outcome == ADMISSIBLE else 1.0), None
    return unsupported / assessed, None


def claim_counts(candidate: Mapping[str, Any], contract: Contract) -> tuple[int, int, int]:
    """Return (assessed, unsupported, excluded) claim counts of a candidate's resolution.

    Claims labelled ``evidence_unavailable`` are excluded when that outcome is.
    """
    assessed = unsupported = excluded = 0
    for label, count in candidate.get("claims", {}).items():
        if label == EVIDENCE_UNAVAILABLE and contract.policies["evidence_unavailable_as"] == (
            "exclude"
        ):
            excluded += count
            continue
        assessed += count
        if label != SUPPORTED:
            unsupported += count
    return assessed, unsupported, excluded


def exclusions(reasons: Sequence[str | None]) -> dict[str, int]:
    """Count the exclusion reasons (None = not excluded), sorted by reason."""
    return dict(sorted(Counter(r for r in reasons if r is not None).items()))


# -- questions and units ----------------------------------------------------------------------
@dataclass
class PreparedQuestion:
    """One question's ranked answers and conformal score (see the module docstring).

    ``samples_used`` are the answered samples the stopping rule keeps; ``classes`` are most
    frequent first; ``score`` is the rank of the best admissible class (inf: none);
    ``inconsistent_classes`` counts classes whose samples disagree on admissibility.
    """

    question: Mapping[str, Any]
    samples_available: int = 0
    samples_used: int = 0
    no_answer_samples: int = 0
    classes: tuple[str, ...] = ()
    mode_candidate: Mapping[str, Any] | None = None
    score: float = math.inf
    excluded: str | None = None
    inconsistent_classes: int = 0

    @property
    def group(self) -> str:
        """The question's group key, or a group of its own when it has none."""
        return self.question["group"] or f"question:{self.question['id']}"


def _admissible_classes(
    prepared: PreparedQuestion,
    kept: Sequence[Mapping[str, Any]],
    forms: Sequence[str],
    contract: Contract,
) -> set[str]:
    """Record inconsistency and exclusion on ``prepared``; return the admissible classes."""
    admissible: dict[str, bool] = {}
    inconsistent: set[str] = set()
    reasons: list[str] = []
    for candidate, form in zip(kept, forms, strict=True):
        loss, reason = candidate_loss(candidate, contract)
        if reason is not None:
            reasons.append(reason)
            continue
        ok = loss == 0
        if form in admissible and admissible[form] != ok:
            inconsistent.add(form)
            admissible[form] = False
        else:
            admissible.setdefault(form, ok)
    prepared.inconsistent_classes = len(inconsistent)
    if reasons:
        prepared.excluded = PENDING if PENDING in reasons else reasons[0]
    return {form for form, ok in admissible.items() if ok}


@dataclass(frozen=True)
class RankedAnswers:
    """One question's answered samples, cut by the stopping rule and ranked by frequency.

    ``kept`` are the answered candidates the stopping rule keeps (sample order), ``forms`` their
    canonical forms; ``profile`` ranks the classes under the declared tie rule.
    """

    samples_available: int
    kept: tuple[Mapping[str, Any], ...]
    forms: tuple[str, ...]
    profile: FrequencyProfile


def rank_answers(
    candidates: Sequence[Mapping[str, Any]], contract: Contract, canon: Callable[[str], str]
) -> RankedAnswers:
    """Canonicalise, stop and rank one question's answers (labels are not read).

    Raises:
        StatsError: from the stopping rule or the frequency profile on malformed answers.
    """
    answered = [c for c in candidates if c["answer"] is not None]
    answers = [c["answer"] for c in answered]
    used = len(answers)
    if contract.stopping_delta is not None and answers:
        used = sequential_stop(
            answers, delta=float(contract.stopping_delta), canonicaliser=canon
        ).samples_used
    forms = tuple(canon(answer) for answer in answers[:used])
    # the spec's tie rule is validated when the spec is written (``spec_clean``)
    tie_rule = cast(TieRule, contract.tie_rule)
    profile = frequency_profile(forms, canonicaliser="exact", tie_rule=tie_rule)
    return RankedAnswers(
        samples_available=len(answers), kept=tuple(answered[:used]), forms=forms, profile=profile
    )


def prepare_question(
    question: Mapping[str, Any], contract: Contract, canon: Callable[[str], str]
) -> PreparedQuestion:
    """Canonicalise, stop, rank and score one question's answers.

    Raises:
        StatsError: from the stopping rule or the frequency profile on malformed answers.
    """
    prepared = PreparedQuestion(question=question)
    ranked = rank_answers(question["candidates"], contract, canon)
    kept, forms, profile = ranked.kept, ranked.forms, ranked.profile
    prepared.no_answer_samples = len(question["candidates"]) - ranked.samples_available
    prepared.samples_available = ranked.samples_available
    prepared.samples_used = len(kept)
    prepared.classes = profile.classes
    if profile.mode is not None:
        prepared.mode_candidate = next(
            c for c, f in zip(kept, forms, strict=True) if f == profile.mode
        )
    admissible = _admissible_classes(prepared, kept, forms, contract)
    prepared.score = rank_score(profile, admissible)
    return prepared


@dataclass
class Unit:
    """One eligible unit: a question and the candidate its selector emits (None: no answer).

    ``score`` is the candidate's score times the contract's sign (-inf when missing);
    ``bounded_loss`` is None for a 0/1 loss, when excluded, or without a candidate.
    """

    prepared: PreparedQuestion
    candidate: Mapping[str, Any] | None
    loss: int | None = None
    excluded: str | None = None
    score: float = -math.inf
    missing_score: bool = False
    bounded_loss: float | None = None

    @property
    def group(self) -> str:
        """The group of the unit's question."""
        return self.prepared.group


def selected_candidates(
    prepared: PreparedQuestion, selector: str
) -> list[Mapping[str, Any] | None]:
    """Return the candidates a selector emits for one question (None: nothing to emit).

    ``selector`` is ``"each_candidate"`` (every candidate), or ``"is_selected"``,
    ``"first_sample"`` or ``"mode"`` (one entry, possibly None).

    Raises:
        StatsError: on an unknown selector.
    """
    candidates = prepared.question["candidates"]
    if selector == "each_candidate":
        return list(candidates)
    if selector == "is_selected":
        flagged = [c for c in candidates if c["selected"]]
        return [flagged[0] if flagged else None]
    if selector == "first_sample":
        return [candidates[0] if candidates else None]
    if selector == "mode":
        return [prepared.mode_candidate]
    raise StatsError(f"unknown selector {selector!r}")


def make_units(prepared: Sequence[PreparedQuestion], contract: Contract) -> list[Unit]:
    """Return the units of a partition, with their loss (or exclusion) and transformed score.

    Units come question by question, in input order.

    Raises:
        StatsError: on an unknown selector, or a bounded candidate-field loss that is not a
            number in [0, 1].
    """
    units = []
    for question in prepared:
        for candidate in selected_candidates(question, contract.selector):
            unit = Unit(prepared=question, candidate=candidate)
            if candidate is not None:
                unit.loss, unit.excluded = candidate_loss(candidate, contract)
                if contract.bounded:
                    unit.bounded_loss, _ = candidate_bounded_loss(candidate, contract)
                raw = candidate.get("score")
                if raw is None or (isinstance(raw, float) and math.isnan(raw)):
                    unit.missing_score = True
                else:
                    unit.score = contract.sign * float(raw)
            units.append(unit)
    return units
