"""The label budget plan of a calibration spec, on the labels resolved so far."""

from __future__ import annotations

from typing import Any

from certification.contract import spec_content
from certification.exceptions import PlanUnavailable
from certification.models import CalibrationSpec
from certification.selectors.calibration import calibration_inputs
from certification.stats.errors import StatsError


def calibration_spec_plan(*, spec: CalibrationSpec, n_more: int | None = None) -> dict[str, Any]:
    """Plan how many more calibration labels ``spec`` needs, from its current inputs.

    Reads the inputs snapshot a run of the spec would read now (``calibration_inputs``: four
    queries) and plans it with :func:`certification.certificates.plan.plan_compute`; nothing is
    stored. The caller has scoped ``spec`` to the viewer's project. ``n_more`` lies in
    [0, ``certification.stats.planning.MAX_ADDITIONAL``]. Returns ``spec`` (id, name, version,
    content_sha256) and the plan's keys (see ``plan_compute``).

    Raises:
        PlanUnavailable: when a statistic cannot be computed on the inputs (a run of them
            would fail the same way).
    """
    # The plan's statistics (NumPy, SciPy) load with the first plan, not with the web process.
    from certification.certificates.plan import plan_compute

    try:
        plan = plan_compute(
            contract=spec_content(spec), inputs=calibration_inputs(spec=spec), n_more=n_more
        )
    except StatsError as exc:
        raise PlanUnavailable(f"the current labels cannot be planned: {exc}") from exc
    return {
        "spec": {
            "id": spec.pk,
            "name": spec.name,
            "version": spec.version,
            "content_sha256": spec.content_sha256,
        },
        **plan,
    }
