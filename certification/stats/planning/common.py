"""What both plans share: the search budget and the check of a requested number of units.

The budget is defined in :mod:`certification.stats.limits`, which loads no NumPy.
"""

from __future__ import annotations

from certification.stats.errors import StatsError
from certification.stats.intervals import check_count
from certification.stats.limits import MAX_ADDITIONAL

__all__ = ["MAX_ADDITIONAL", "check_n_more"]


def check_n_more(n_more: int | None, budget: int) -> int | None:
    """Return ``n_more`` as an int in [0, budget], or None.

    Raises:
        StatsError: if it is not a non-negative integer or exceeds ``budget``.
    """
    if n_more is None:
        return None
    more = check_count(n_more, name="n_more")
    if more > budget:
        raise StatsError(f"n_more must be at most {budget:,}, got {more:,}")
    return more
