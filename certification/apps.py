"""App config for certification."""

from django.apps import AppConfig


class CertificationConfig(AppConfig):
    """Calibration specs and runs, evaluator audits and releases (built by later issues)."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "certification"
