"""The run page's plots, rendered once per finished run and stored (``CalibrationRunPlots``).

matplotlib takes seconds per plot; a finished run's result never changes, so its plots are
rendered on the first request for them and read back afterwards, keyed by the run, its
``stats_version`` and :data:`certification.plots.PLOTS_VERSION`. Only a done run has a result
to plot (the page shows none for a pending, running or failed run).
"""

from __future__ import annotations

import logging

from certification import plots
from certification.models import CalibrationRun, CalibrationRunPlots, RunStatus

logger = logging.getLogger(__name__)


def run_plots_get(*, run: CalibrationRun) -> dict[str, str]:
    """Return the run's plots by name (SVG documents), rendering and storing them once.

    Returns:
        {plot name: SVG} as :func:`certification.plots.run_plots` gives them; empty for a run
        that is not done.

    Concurrency: two first requests may both render; the first insert wins and the other's
    insert is ignored (the unique key), so both return the same plots. No transaction is held
    while rendering.
    """
    if run.status != RunStatus.DONE or not run.result:
        return {}
    key = {"run": run, "stats_version": run.stats_version, "renderer_version": plots.PLOTS_VERSION}
    cached = CalibrationRunPlots.objects.filter(**key).values_list("plots", flat=True).first()
    if cached is not None:
        rendered: dict[str, str] = cached
        return rendered
    rendered = plots.run_plots(run.result)
    CalibrationRunPlots.objects.bulk_create(
        [CalibrationRunPlots(**key, plots=rendered)], ignore_conflicts=True
    )
    logger.info("calibration_run.plots_rendered", extra={"run": run.pk, "plots": len(rendered)})
    return rendered
