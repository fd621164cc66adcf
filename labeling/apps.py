"""App config for labeling."""

from django.apps import AppConfig


class LabelingConfig(AppConfig):
    """Projects, policies, pinned sources, questions, candidates, claims, items and imports."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "labeling"
