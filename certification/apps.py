"""App config for certification."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.apps import AppConfig
from django.db import transaction

AGREEMENT_RECEIVER_UID = "certification.agreement_recompute_on_resolution"
AGREEMENT_PANEL = "agreement"
AGREEMENT_TEMPLATE = "certification/_agreement.html"
CALIBRATION_RECEIVER_UID = "certification.calibration_refresh_on_resolution"
CALIBRATION_PANEL = "calibration"
AUDIT_RECEIVER_UID = "certification.audit_refresh_on_resolution"
CALIBRATION_TEMPLATE = "certification/_calibration_panel.html"


def agreement_panel_context(*, project: Any, actor: Any) -> dict[str, Any]:
    """Context of the dashboard's agreement panel: ``agreement`` (None before the first run)."""
    from certification.selectors import agreement_report_get

    return {"agreement": agreement_report_get(project=project, actor=actor)}


# What every resolution enqueues, by receiver id: each task recomputes from the current
# labels and is idempotent (an unchanged input hash writes nothing).
RESOLUTION_TASKS = {
    AGREEMENT_RECEIVER_UID: "agreement_recompute_task",
    CALIBRATION_RECEIVER_UID: "calibration_runs_refresh_task",
    AUDIT_RECEIVER_UID: "audit_reports_refresh_task",
}


def resolution_receiver(task_name: str) -> Callable[..., None]:
    """Return a receiver of ``labeling.signals.items_resolved`` enqueuing one project task.

    The receiver enqueues ``certification.tasks.<task_name>.delay(project_id)``. The signal is
    sent after the resolving transaction commits; ``on_commit`` keeps the enqueue
    transaction-safe should a sender ever fire it inside one. ``robust=True``: with eager Celery
    (development) the task runs right here, and a failure of the statistics must not turn the
    adjudicator's committed resolution into an error page; it is logged instead.
    """

    def receive(sender: Any, *, project_id: int, **kwargs: Any) -> None:
        from certification import tasks  # the one allowed local import

        task = getattr(tasks, task_name)

        # A named function, not functools.partial: Django logs a robust callback's __qualname__.
        def enqueue() -> None:
            task.delay(project_id)

        enqueue.__qualname__ = f"enqueue_{task_name}"
        transaction.on_commit(enqueue, robust=True)

    return receive


def calibration_panel_context(*, project: Any, actor: Any) -> dict[str, Any]:
    """Context of the dashboard's calibration panel: the latest version of each spec."""
    from certification.selectors import calibration_spec_list

    specs = list(calibration_spec_list(project=project).filter(next_version__isnull=True))
    return {"calibration_specs": specs}


class CertificationConfig(AppConfig):
    """The certification app: agreement statistics, calibration, evaluator audits, releases."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "certification"

    def ready(self) -> None:
        """Subscribe to the labelling domain's one event; add the dashboard panels.

        Every resolution enqueues the agreement recompute, the calibration refresh and the
        evaluator audits' recompute.

        The panel (``labeling.views.panels``) shows the agreement figures on the project
        dashboard to managers and adjudicators; rater names only to managers
        (``agreement_report_get``).
        """
        from labeling.signals import items_resolved
        from labeling.views.panels import dashboard_panel_register

        for uid, task_name in RESOLUTION_TASKS.items():
            items_resolved.connect(resolution_receiver(task_name), dispatch_uid=uid, weak=False)
        dashboard_panel_register(
            name=AGREEMENT_PANEL, template=AGREEMENT_TEMPLATE, context=agreement_panel_context
        )
        dashboard_panel_register(
            name=CALIBRATION_PANEL,
            template=CALIBRATION_TEMPLATE,
            context=calibration_panel_context,
        )
