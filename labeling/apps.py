"""App config for labeling."""

from django.apps import AppConfig


class LabelingConfig(AppConfig):
    """Projects, policies, pinned sources, questions, candidates, claims, items and imports."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "labeling"

    def ready(self) -> None:
        """Connect the receiver that revokes a user's API tokens when their password changes."""
        from django.contrib.auth import get_user_model
        from django.db.models.signals import pre_save

        from labeling.services.tokens import password_change_revokes_tokens

        pre_save.connect(
            password_change_revokes_tokens,
            sender=get_user_model(),
            dispatch_uid="labeling.password_change_revokes_tokens",
        )
