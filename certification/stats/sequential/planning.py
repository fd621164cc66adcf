"""How many labels until the betting test stops, at an assumed true rate (by simulation).

Source: the stopping time of :func:`~certification.stats.sequential.betting.below_target_test`
(Waudby-Smith and Ramdas (2024), JRSS-B 86(1), Sec. 4), simulated; no closed form exists.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from certification.stats.errors import StatsError
from certification.stats.intervals import check_open_unit
from certification.stats.sequential.betting import below_target_test

#: Replicate sequences of a plan: the mean's Monte Carlo standard error is then at most
#: population / (2 sqrt(200)), about 3.5% of the population.
REPLICATES = 200


@dataclass(frozen=True)
class StoppingPlan:
    """The simulated number of labels at which the test of H0: rate >= target stops.

    ``population`` N items hold ``errors`` = round(rate N); ``replicates`` seeded draw orders
    are simulated. ``mean``, ``median`` and ``quantile_90`` summarise the labels at the stop (N
    where the test never stops); ``share_stopped`` is the share of replicates stopping before
    all N are labelled.
    """

    rate: float
    target: float
    delta: float
    population: int
    errors: int
    replicates: int
    seed: int
    mean: float
    median: float
    quantile_90: float
    share_stopped: float
    assumption: str


def stopping_plan(
    rate: float,
    *,
    target: float,
    delta: float,
    population: int,
    replicates: int = REPLICATES,
    seed: int = 0,
) -> StoppingPlan:
    """Simulate the labels the below-target test needs when the true rate is ``rate``.

    A population of N items with round(rate N) errors is drawn in ``replicates`` seeded random
    orders without replacement; each order is fed to
    :func:`~certification.stats.sequential.betting.below_target_test` (one stratum) and the
    first time it rejects is recorded (N when it never does: all items labelled).

    ``rate`` lies in [0, 1) (below ``target`` for a stop to be likely); the same inputs give the
    same plan.

    Raises:
        StatsError: on a rate outside [0, 1), target or delta outside (0, 1), N < 1 or
            replicates < 1.
    """
    t = check_open_unit(target, name="target")
    g = check_open_unit(delta, name="delta")
    if isinstance(rate, bool) or not (0.0 <= float(rate) < 1.0):
        raise StatsError(f"rate must lie in [0, 1), got {rate!r}")
    if isinstance(population, bool) or int(population) != population or population < 1:
        raise StatsError(f"population must be a positive integer, got {population!r}")
    if isinstance(replicates, bool) or int(replicates) != replicates or replicates < 1:
        raise StatsError(f"replicates must be a positive integer, got {replicates!r}")
    big_n = int(population)
    errors = round(float(rate) * big_n)
    items = np.zeros(big_n)
    items[:errors] = 1.0
    rng = np.random.default_rng(int(seed))
    stops = np.empty(int(replicates))
    for r in range(int(replicates)):
        test = below_target_test(rng.permutation(items), target=t, delta=g, population=big_n)
        stops[r] = big_n if test.stopped_at is None else test.stopped_at
    return StoppingPlan(
        rate=float(rate),
        target=t,
        delta=g,
        population=big_n,
        errors=errors,
        replicates=int(replicates),
        seed=int(seed),
        mean=float(stops.mean()),
        median=float(np.median(stops)),
        quantile_90=float(np.quantile(stops, 0.9)),
        share_stopped=float(np.mean(stops < big_n)),
        assumption=(
            f"simulated: a true error rate of {float(rate):g} ({errors} of {big_n} items), "
            f"one stratum labelled in a random order, {int(replicates)} seeded replicates"
        ),
    )
