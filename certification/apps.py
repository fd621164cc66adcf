"""App config for certification."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig

DERIVED_SCHEDULER = "certification.derived"
AGREEMENT_PANEL = "agreement"
AGREEMENT_TEMPLATE = "certification/_agreement.html"
CALIBRATION_PANEL = "calibration"
CALIBRATION_TEMPLATE = "certification/_calibration_panel.html"
POSTERIOR_PANEL = "model-estimate"
POSTERIOR_TEMPLATE = "certification/_item_posterior.html"


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


def derived_schedule_after_commit(project_id: int, kinds: tuple[str, ...]) -> None:
    """Schedule a project's marked kinds; the scheduler ``labeling.derived`` calls after commit."""
    from certification.services.derived import derived_schedule_kinds

    derived_schedule_kinds(project_id=project_id, kinds=kinds)


def calibration_panel_context(*, project: Any, actor: Any) -> dict[str, Any]:
    """Context of the dashboard's calibration panel: the latest version of each spec."""
    from certification.selectors import calibration_spec_list

    specs = list(calibration_spec_list(project=project).filter(next_version__isnull=True))
    return {"calibration_specs": specs}


def posterior_panel_context(
    *, project: Any, item_id: int, claim_ids: tuple[int, ...]
) -> dict[str, Any]:
    """Context of the adjudication page's model-estimate panel: ``posterior`` (or None)."""
    from certification.selectors import derived_freshness, item_posterior_get

    return {
        "posterior": item_posterior_get(project=project, item_id=item_id, claim_ids=claim_ids),
        "claim_numbers": {claim_id: n for n, claim_id in enumerate(claim_ids, start=1)},
        "posterior_freshness": derived_freshness(project=project)["reliability"],
    }


class CertificationConfig(AppConfig):
    """The certification app: agreement statistics, calibration, evaluator audits, releases."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "certification"

    def ready(self) -> None:
        """Register the error codes, the derived results' scheduler, background work, the panels.

        This app's kinds of background work are calibration runs, release builds, derived
        results and the drift watches of applied certificates (``labeling.engine``).

        Every write that marks a derived result stale (``labeling.derived.derived_mark``)
        hands the project's marked kinds to :func:`derived_schedule_after_commit` after its commit.
        A write that changes items or evaluators (a resolution, labels of an evaluator) marks
        the calibration and audit kinds only when they read one of them
        (``calibration_reads``, ``audit_reads``; ``labeling.derived.derived_mark_touched``).

        The panel (``labeling.views.panels``) shows the agreement figures on the project
        dashboard to managers and adjudicators; rater names only to managers
        (``agreement_report_get``). The adjudication page's panel shows the Dawid–Skene
        posterior of the item, once its blind votes are in (the page exists only then, and
        only for adjudicators and managers).
        """
        # The tasks module registers the tasks the services send (by name)
        # (labeling.dispatch): imported here, every process that sets Django up has them.
        import certification.tasks  # noqa: F401
        from certification.exceptions import CertificationErrorCode
        from certification.services.audit import audit_reads
        from certification.services.calibration import calibration_reads, calibration_run_work_kind
        from certification.services.derived import derived_work_kind
        from certification.services.drift import drift_watch_work_kind
        from certification.services.releases.build import release_build_work_kind
        from labeling.derived import derived_inputs_register, derived_scheduler_register
        from labeling.engine import work_kind_register
        from labeling.exceptions import error_codes_register
        from labeling.models import DerivedKind
        from labeling.views.panels import adjudication_panel_register, dashboard_panel_register

        error_codes_register(CertificationErrorCode)
        derived_scheduler_register(DERIVED_SCHEDULER, derived_schedule_after_commit)
        derived_inputs_register(DerivedKind.CALIBRATION, calibration_reads)
        derived_inputs_register(DerivedKind.AUDIT, audit_reads)
        for kind in (calibration_run_work_kind(), release_build_work_kind(), derived_work_kind()):
            work_kind_register(kind)
        work_kind_register(drift_watch_work_kind())
        dashboard_panel_register(
            name=AGREEMENT_PANEL, template=AGREEMENT_TEMPLATE, context=agreement_panel_context
        )
        dashboard_panel_register(
            name=CALIBRATION_PANEL,
            template=CALIBRATION_TEMPLATE,
            context=calibration_panel_context,
        )
        adjudication_panel_register(
            name=POSTERIOR_PANEL, template=POSTERIOR_TEMPLATE, context=posterior_panel_context
        )
