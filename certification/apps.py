"""App config for certification."""

from __future__ import annotations

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


def enqueue_agreement_recompute(sender: Any, *, project_id: int, **kwargs: Any) -> None:
    """Receive ``labeling.signals.items_resolved``: enqueue the project's agreement recompute.

    The signal is sent after the resolving transaction commits; ``on_commit`` keeps the enqueue
    transaction-safe should a sender ever fire it inside one. ``robust=True``: with eager Celery
    (development) the task runs right here, and a failure of the statistics must not turn the
    adjudicator's committed resolution into an error page; it is logged instead.
    """
    from certification.tasks import agreement_recompute_task  # the one allowed local import

    # A named function, not functools.partial: Django logs a robust callback's __qualname__.
    def enqueue() -> None:
        agreement_recompute_task.delay(project_id)

    transaction.on_commit(enqueue, robust=True)


def calibration_panel_context(*, project: Any, actor: Any) -> dict[str, Any]:
    """Context of the dashboard's calibration panel: the latest version of each spec."""
    from certification.selectors import calibration_spec_list

    specs = [s for s in calibration_spec_list(project=project) if not s.has_next]
    return {"calibration_specs": specs}


def enqueue_calibration_refresh(sender: Any, *, project_id: int, **kwargs: Any) -> None:
    """Receive ``labeling.signals.items_resolved``: enqueue the project's calibration refresh.

    The refresh (``calibration_runs_refresh``) starts a run for each latest spec whose inputs
    changed, and nothing otherwise (idempotent: the same inputs hash gives no new run). As for
    the agreement, ``robust=True`` keeps a failing refresh from turning the committed
    resolution into an error page.
    """
    from certification.tasks import calibration_runs_refresh_task  # the one allowed local import

    def enqueue() -> None:
        calibration_runs_refresh_task.delay(project_id)

    transaction.on_commit(enqueue, robust=True)


def enqueue_audit_refresh(sender: Any, *, project_id: int, **kwargs: Any) -> None:
    """Receive ``labeling.signals.items_resolved``: enqueue the project's audit recompute.

    Idempotent (an unchanged input hash writes nothing); ``robust=True`` as for the agreement.
    """
    from certification.tasks import audit_reports_refresh_task  # the one allowed local import

    def enqueue() -> None:
        audit_reports_refresh_task.delay(project_id)

    transaction.on_commit(enqueue, robust=True)


class CertificationConfig(AppConfig):
    """Agreement statistics (issue 3); calibration specs and runs (issue 4); evaluator audits
    and releases (later issues)."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "certification"

    def ready(self) -> None:
        """Subscribe to the labelling domain's one event (STYLE.md C1); add the dashboard panels.

        Every resolution enqueues the agreement recompute, the calibration refresh and the
        evaluator audits' recompute.

        The panel (``labeling.views.panels``) shows the agreement figures on the project
        dashboard to managers and adjudicators; rater names only to managers
        (``agreement_report_get``).
        """
        from labeling.signals import items_resolved
        from labeling.views.panels import dashboard_panel_register

        items_resolved.connect(
            enqueue_agreement_recompute, dispatch_uid=AGREEMENT_RECEIVER_UID, weak=False
        )
        items_resolved.connect(
            enqueue_calibration_refresh, dispatch_uid=CALIBRATION_RECEIVER_UID, weak=False
        )
        items_resolved.connect(enqueue_audit_refresh, dispatch_uid=AUDIT_RECEIVER_UID, weak=False)
        dashboard_panel_register(
            name=AGREEMENT_PANEL, template=AGREEMENT_TEMPLATE, context=agreement_panel_context
        )
        dashboard_panel_register(
            name=CALIBRATION_PANEL,
            template=CALIBRATION_TEMPLATE,
            context=calibration_panel_context,
        )
