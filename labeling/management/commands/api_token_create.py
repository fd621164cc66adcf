"""``manage.py api_token_create USERNAME [--name NAME] [--days N]``: a new API token for scripts.

Prints the secret alone on stdout (``TOKEN=$(manage.py api_token_create ci --name CI)``); only its
hash is stored. It replaces DRF's ``drf_create_token``, whose tokens never expired.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.exceptions import LabelingError
from labeling.services.tokens import TOKEN_DEFAULT_DAYS, TOKEN_MAX_DAYS, api_token_create


class Command(BaseCommand):
    """Make a named, expiring API token for a user and print its secret."""

    help = "Make a named API token for USERNAME (expiring after --days) and print its secret."

    def add_arguments(self, parser: CommandParser) -> None:
        """USERNAME, --name, --days."""
        parser.add_argument("username")
        parser.add_argument("--name", default="command line", help="what the token is for")
        parser.add_argument(
            "--days",
            type=int,
            default=TOKEN_DEFAULT_DAYS,
            help=f"lifetime in days, 1 to {TOKEN_MAX_DAYS} (default {TOKEN_DEFAULT_DAYS})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Make the token; an unknown user or a bad name or lifetime is a CommandError."""
        users = get_user_model().objects
        try:
            user = users.get(**{users.model.USERNAME_FIELD: options["username"]})
        except users.model.DoesNotExist:
            raise CommandError(f"no user {options['username']!r}") from None
        try:
            created = api_token_create(
                user=user, name=options["name"], expires_in_days=options["days"]
            )
        except LabelingError as exc:
            raise CommandError(f"{exc.field}: {exc.message}") from None
        self.stdout.write(created.secret)
