"""Vote tallies: the additive counts every agreement statistic is computed from.

Krippendorff's alpha, Fleiss' kappa, percent agreement, Cohen's kappa per rater pair and the
per-label and per-rater counts are all functions of sums over units: each unit (an item at the
answer level, a claim at the claim level) contributes counts that depend on its own votes only.
A :class:`Tally` holds those sums, so a project's tally is the sum of its items' tallies, and a
vote changes the project's tally by the difference of one item's tally before and after it. The
label loop keeps it that way at a cost that does not grow with the project
(:mod:`labeling.services.vote_tally`).

Keys, per policy version ``v`` and label level ``l`` (votes of two versions are never pooled):

- ``("votes", v, l, value)``: votes with that value;
- ``("rater", v, l, rater)``: votes of that rater;
- ``("units", v, l, m)``: units with exactly ``m`` votes;
- ``("pairable", v, l, m, value)``: votes with that value in units of ``m`` >= 2 votes;
- ``("agreeing", v, l, m)``: over units of ``m`` >= 2 votes, the sum of n_c (n_c - 1) over
  values c (n_c votes of value c in the unit): the ordered pairs of agreeing votes;
- ``("pair", v, l, rater_a, rater_b, value_a, value_b)``: units both raters voted on with those
  values (``rater_a`` before ``rater_b`` in :func:`rater_sort_key` order);
- ``("coincident", v, l, m, value_c, value_k)``: over units of ``m`` >= 2 votes, the ordered
  pairs of votes from different raters with values (c, k), n_c (n_k - [c = k]): Krippendorff's
  coincidence matrix is the sum over m of these divided by m - 1 (alpha for any metric).

Pure Python: no Django, no NumPy.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

Key = tuple[Any, ...]
# (item id, policy version, level, unit id, rater id, value): one vote, as the selectors read it.
VoteRow = tuple[int, int, str, int, str, str]


def rater_sort_key(rater: str) -> tuple[int, str, int]:
    """Order rater ids: imported annotators by pseudonym, then accounts by numeric id."""
    kind, _, name = rater.partition(":")
    if kind == "user" and name.isdigit():
        return (1, "", int(name))
    return (0, name, 0)


class Tally(Counter[Key]):
    """Counts keyed as the module describes; zero counts are dropped by :meth:`clean`."""

    def clean(self) -> Tally:
        """Return a copy without zero entries (a subtraction may leave zeros and negatives)."""
        return Tally({key: count for key, count in self.items() if count})

    def add(self, other: Tally) -> None:
        """Add ``other`` in place, negative counts included."""
        self.update(other)

    def to_json(self) -> list[list[Any]]:
        """The non-zero entries as ``[[*key], count]`` lists, sorted (a canonical form)."""
        return sorted([list(key), count] for key, count in self.items() if count)

    @classmethod
    def from_json(cls, data: Iterable[list[Any]] | None) -> Tally:
        """Read what :meth:`to_json` wrote (``None`` or ``[]``: an empty tally)."""
        return cls({tuple(key): int(count) for key, count in data or ()})

    def sha256(self, **salt: Any) -> str:
        """The sha256 of the canonical JSON of the non-zero entries and ``salt``."""
        text = json.dumps(
            {"tally": self.to_json(), **salt}, separators=(",", ":"), ensure_ascii=False
        )
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def versions(self) -> list[int]:
        """Policy versions with at least one vote, ascending."""
        return sorted({key[1] for key, count in self.items() if key[0] == "votes" and count})


def unit_tally(version: int, level: str, votes: dict[str, str]) -> Tally:
    """The contribution of one unit's votes (rater id → value) at one version and level."""
    tally = Tally()
    m = len(votes)
    if not m:
        return tally
    tally[("units", version, level, m)] += 1
    per_value: Counter[str] = Counter()
    for rater, value in votes.items():
        tally[("votes", version, level, value)] += 1
        tally[("rater", version, level, rater)] += 1
        per_value[value] += 1
    if m < 2:
        return tally
    for value, n in per_value.items():
        tally[("pairable", version, level, m, value)] += n
    tally[("agreeing", version, level, m)] += sum(n * (n - 1) for n in per_value.values())
    for c, n_c in per_value.items():
        for k, n_k in per_value.items():
            if c != k or n_c > 1:
                tally[("coincident", version, level, m, c, k)] += n_c * (n_k - (c == k))
    raters = sorted(votes, key=rater_sort_key)
    for i, rater_a in enumerate(raters):
        for rater_b in raters[i + 1 :]:
            tally[("pair", version, level, rater_a, rater_b, votes[rater_a], votes[rater_b])] += 1
    return tally


def items_votes(rows: Iterable[VoteRow]) -> dict[int, list[list[Any]]]:
    """Each item's votes as ``[version, level, unit, rater, value]`` lists, sorted.

    One per (version, level, unit, rater): when rows repeat one, the last counts (as the vote
    matrices of :mod:`labeling.selectors.votes` read them).
    """
    units: dict[int, dict[tuple[int, str, int, str], str]] = {}
    for item_id, version, level, unit, rater, value in rows:
        units.setdefault(item_id, {})[(version, level, unit, rater)] = value
    return {
        item_id: sorted([*key, value] for key, value in votes.items())
        for item_id, votes in units.items()
    }


def votes_tally(votes: Iterable[Sequence[Any]]) -> Tally:
    """The tally of one item's (or many items') ``[version, level, unit, rater, value]`` votes."""
    units: dict[tuple[int, str, int], dict[str, str]] = {}
    for version, level, unit, rater, value in votes:
        units.setdefault((version, level, unit), {})[rater] = value
    out = Tally()
    for (version, level, _unit), unit_votes in units.items():
        out.add(unit_tally(version, level, unit_votes))
    return out


def total(tallies: Iterable[Tally]) -> Tally:
    """The sum of ``tallies``, zero entries dropped."""
    out = Tally()
    for tally in tallies:
        out.add(tally)
    return out.clean()
