"""App config for certification."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig

DERIVED_SCHEDULER = "certification.derived"
AGREEMENT_PANEL = "agreement"
AGREEMENT_TEMPLATE = "certification/_agreement.html"
CALIBRATION_PANEL = "calibration"
CALIBRATION_TEMPLATE = "certification/_calibration_panel.html"


def agreement_panel_context(*, project: Any, actor: Any) -> dict[str, Any]:
    """Context of the dashboard's agreement panel: ``agreement`` (None before the first run).

    ``agreement_freshness`` says which changes the figures cover and how many newer ones wait;
    ``agreement_chart`` plots the figures per level (None before the first run).
    """
    from certification.charts import agreement_chart
    from certification.selectors import agreement_report_get, derived_freshness

    agreement = agreement_report_get(project=project, actor=actor)
    freshness = derived_freshness(project=project)["agreement"]
    return {
        "agreement": agreement,
        "agreement_freshness": freshness,
        "agreement_chart": agreement_chart(agreement, freshness),
    }


def derived_schedule_after_commit(project_id: int, kind: str) -> None:
    """Schedule a marked (project, kind); the scheduler ``labeling.derived`` calls after commit."""
    from certification.services.derived import derived_schedule

    derived_schedule(project_id=project_id, kind=kind)


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
        """Register the scheduler of the derived results; add the dashboard panels.

        Every write that marks a derived result stale (``labeling.derived.derived_mark``)
        hands the (project, kind) to :func:`derived_schedule_after_commit` after its commit.

        The panel (``labeling.views.panels``) shows the agreement figures on the project
        dashboard to managers and adjudicators; rater names only to managers
        (``agreement_report_get``).
        """
        from labeling.derived import derived_scheduler_register
        from labeling.views.panels import dashboard_panel_register

        derived_scheduler_register(DERIVED_SCHEDULER, derived_schedule_after_commit)
        dashboard_panel_register(
            name=AGREEMENT_PANEL, template=AGREEMENT_TEMPLATE, context=agreement_panel_context
        )
        dashboard_panel_register(
            name=CALIBRATION_PANEL,
            template=CALIBRATION_TEMPLATE,
            context=calibration_panel_context,
        )
