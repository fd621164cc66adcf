"""Nonconformity scores of one question from its sampled answers, read over strings.

The sampled answers are canonicalised (:mod:`certification.stats.canonical`) and their classes
ranked by frequency (descending), ties broken by the declared tie rule
(:data:`TIE_RULES`). The rank score is the 1-based rank of the highest-ranked admissible class, and
infinity when no admissible class was sampled (Mouzouni 2026, arXiv:2602.21368, Definition 2.4).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Literal

from certification.stats.canonical import Canonicaliser, get_canonicaliser, parse_number
from certification.stats.errors import StatsError

TieRule = Literal["canonical_ascending", "first_seen"]
#: Declared tie rules for classes with equal counts: ``"canonical_ascending"`` (the canonical
#: classes in ascending order, :func:`canonical_order_key`; the default) or ``"first_seen"``
#: (the class sampled first).
TIE_RULES: tuple[TieRule, ...] = ("canonical_ascending", "first_seen")
AlphaLike = float | str | Fraction | Decimal

INF = math.inf


def canonical_order_key(cls: str) -> tuple[int, Fraction, str]:
    """The ascending order of the ``"canonical_ascending"`` tie rule, as a sort key.

    Classes that parse as numbers (:func:`certification.stats.canonical.parse_number`, exactly,
    so "5" < "1000" and "1/3" < "0.5") come first in numeric order, equal values in string
    order; every other class follows in string (code point) order. Comparing numerically only
    when both classes are numbers and as strings otherwise would not be an order ("2" < "10" <
    "1a" < "2"), so numbers go first as a block. The key is ``(0, value, cls)`` for a number,
    ``(1, 0, cls)`` otherwise.
    """
    value = parse_number(cls)
    return (1, Fraction(0), cls) if value is None else (0, value, cls)


def resolve_canonicaliser(canonicaliser: Canonicaliser | str) -> Canonicaliser:
    """The canonicaliser itself, or the registered one of that name."""
    return get_canonicaliser(canonicaliser) if isinstance(canonicaliser, str) else canonicaliser


def check_tie_rule(tie_rule: object) -> None:
    """Raise StatsError unless ``tie_rule`` is one of :data:`TIE_RULES`."""
    if tie_rule not in TIE_RULES:
        raise StatsError(f"tie_rule must be one of {TIE_RULES}, got {tie_rule!r}")


@dataclass(frozen=True)
class FrequencyProfile:
    """The canonical classes of one question's samples, ranked.

    ``classes`` are highest-ranked first (rank 1 = the mode), ``counts`` aligned and
    non-increasing, summing to K = ``n_samples``.
    """

    classes: tuple[str, ...]
    counts: tuple[int, ...]
    n_samples: int
    tie_rule: TieRule

    @property
    def mode(self) -> str | None:
        """The top-ranked class, or None when no sample was drawn."""
        return self.classes[0] if self.classes else None

    def rank_of(self, cls: str) -> int | None:
        """The 1-based rank of canonical class ``cls``, or None if it was not sampled."""
        try:
            return self.classes.index(cls) + 1
        except ValueError:
            return None


def frequency_profile(
    samples: Sequence[str],
    *,
    canonicaliser: Canonicaliser | str = "exact",
    tie_rule: TieRule = "canonical_ascending",
) -> FrequencyProfile:
    """Canonicalise one question's samples and rank the classes by frequency.

    ``samples`` are the K answers in sampling order (``"first_seen"`` uses it). K = 0 gives an
    empty profile (its score is infinite).

    Raises:
        StatsError: on an unknown canonicaliser or tie rule, or a non-string sample.
    """
    check_tie_rule(tie_rule)
    canon = resolve_canonicaliser(canonicaliser)
    canonical = [canon(sample) for sample in samples]
    counts = Counter(canonical)
    first = {cls: i for i, cls in reversed(list(enumerate(canonical)))}
    if tie_rule == "canonical_ascending":
        ranked = sorted(counts, key=lambda cls: (-counts[cls], canonical_order_key(cls)))
    else:
        ranked = sorted(counts, key=lambda cls: (-counts[cls], first[cls]))
    return FrequencyProfile(
        classes=tuple(ranked),
        counts=tuple(counts[cls] for cls in ranked),
        n_samples=len(canonical),
        tie_rule=tie_rule,
    )


def rank_score(profile: FrequencyProfile, admissible: Collection[str]) -> float:
    """Nonconformity score: the rank of the highest-ranked admissible class.

    ``admissible`` holds canonical classes (any size; may include unsampled ones). The rank is
    1-based, as a float; ``math.inf`` if no admissible class was sampled (unsolvable at this K).
    """
    for rank, cls in enumerate(profile.classes, start=1):
        if cls in admissible:
            return float(rank)
    return INF


def nonconformity_score(
    samples: Sequence[str],
    admissible: Collection[str],
    *,
    canonicaliser: Canonicaliser | str = "exact",
    tie_rule: TieRule = "canonical_ascending",
) -> float:
    """Score one question from raw strings: the admissible answers are canonicalised too.

    ``math.inf`` when no admissible class was sampled.

    Raises:
        StatsError: on an unknown canonicaliser or tie rule.

    Example: samples A×5, B×3, C×2 score 2 with B admissible and infinity with
    D admissible.
    """
    canon = resolve_canonicaliser(canonicaliser)
    profile = frequency_profile(samples, canonicaliser=canon, tie_rule=tie_rule)
    return rank_score(profile, {canon(answer) for answer in admissible})
