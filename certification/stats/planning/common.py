"""What both plans share: the search budget and the check of a requested number of units."""

from __future__ import annotations

from certification.stats.errors import StatsError
from certification.stats.intervals import check_count

#: The largest number of additional calibration units a plan searches: a threshold that needs
#: more is reported as not certifiable within this budget (a search bound, not a statistic).
MAX_ADDITIONAL = 100_000


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
