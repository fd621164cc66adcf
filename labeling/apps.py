"""App config for labeling."""

from __future__ import annotations

from django.apps import AppConfig


def _recover_now() -> None:
    """One recovery pass of the background engine, here (the embedded default's thread)."""
    from labeling.tasks import work_recover_task

    work_recover_task.apply()


def _sso_recheck_now() -> None:
    """Recheck the single sign-on accounts that are due, here (the embedded default's thread)."""
    from labeling.tasks import sso_recheck_task

    sso_recheck_task.apply()


class LabelingConfig(AppConfig):
    """Projects, policies, pinned sources, questions, candidates, claims, items and imports."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "labeling"

    def ready(self) -> None:
        """Connect the token-revoking receiver; register jobs and the recovery pass.

        Jobs are one kind of the background engine's work (``labeling.engine``). The embedded
        default's web processes run the engine's recovery pass on their background thread
        (``labeling.in_process``), as beat does with a broker.
        """
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.db.models.signals import pre_save

        # The Celery app, configured from the settings, before anything sends a task (the
        # package does not load it: labeling/__init__.py); the tasks module registers the
        # tasks the services send by name (labeling.dispatch).
        import labeling.celery  # noqa: F401
        import labeling.tasks  # noqa: F401
        from labeling.engine import work_kind_register
        from labeling.in_process import periodic_register
        from labeling.services.jobs import job_work_kind
        from labeling.services.tokens import password_change_revokes_tokens

        work_kind_register(job_work_kind())
        periodic_register(
            "work-recover", float(settings.CERTLABEL_WORK_RECOVER_SECONDS), _recover_now
        )
        if settings.CERTLABEL_OIDC_ISSUER:
            from labeling.services.sso import role_map

            role_map()  # a malformed CERTLABEL_OIDC_ROLE_MAP fails the start, naming the entry
            periodic_register("sso-recheck", 60.0, _sso_recheck_now)

        pre_save.connect(
            password_change_revokes_tokens,
            sender=get_user_model(),
            dispatch_uid="labeling.password_change_revokes_tokens",
        )
