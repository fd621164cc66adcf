"""The scores a drift watch compares: one observation per question, label-free.

The watch follows the spec's score field on the units its selector emits, exactly as the
certificate decides them (:mod:`certification.certificates.apply`): the selected, first or mode
candidate, or with ``each_candidate`` every candidate. A question's *observation* is the mean of
its emitted units' finite scores (a single score for every selector but ``each_candidate``); a
question without one has no observation and is skipped, on the calibration partition as in new
traffic. Questions, not candidates, are what the calibration and the traffic draw
exchangeably, so the watch sees one observation per question. No answer text is kept.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from certification.certificates.apply import prepared_question
from certification.certificates.contract import Contract
from certification.stats.canonical import get_canonicaliser

# As in certificates.apply: the units (and so NumPy) are imported where scores are taken, so
# that the web process's pages and serializers, which import this module, do not load NumPy.


def _score(candidate: Mapping[str, Any] | None) -> float | None:
    raw = None if candidate is None else candidate.get("score")
    if raw is None or isinstance(raw, bool) or not isinstance(raw, int | float):
        return None
    return float(raw) if math.isfinite(raw) else None


def emitted_scores(
    questions: Sequence[Mapping[str, Any]], contract: Contract
) -> list[list[float | None]]:
    """Return, per question, the scores of the units its selector emits (None: missing).

    ``questions`` are in the run's inputs shape (``question_parse``, or the snapshot's). One
    list per question, in order; empty when nothing is emitted.

    Raises:
        StatsError: from the stopping rule or the canonicaliser on malformed answers.
    """
    from certification.certificates.units import PreparedQuestion, selected_candidates

    # only the mode selector reads the answers (ranked); the others read the candidates alone
    canon = get_canonicaliser(contract.canonicaliser) if contract.selector == "mode" else None
    scores = []
    for question in questions:
        prepared = (
            PreparedQuestion(question=question)
            if canon is None
            else prepared_question(question, contract, canon)
        )
        scores.append([_score(c) for c in selected_candidates(prepared, contract.selector)])
    return scores


def observation(scores: Sequence[float | None]) -> float | None:
    """The question's observation: the mean of its finite scores, or None when it has none."""
    present = [s for s in scores if s is not None]
    return sum(present) / len(present) if present else None
