"""``manage.py demo_setup``: a ready-to-label demo project with users, for development only.

Creates, idempotently:

- project ``demo`` from ``labeling/demo/sample_workload.jsonl`` (invented questions about a
  fictional town library and a fictional company), imported through ``import_workload``;
- users ``manager``, ``annotator1``, ``annotator2``, ``adjudicator`` with their project roles,
  and the superuser ``admin``, all with the demo password (printed);
- the grouped dev / calibration / test partition (0.2 / 0.4 / 0.4, fixed seed).

The demo password is public, so the command refuses to run unless ``DEBUG`` is on.
Running it again changes nothing but the passwords, which it sets again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from labeling.exceptions import LabelingError
from labeling.models import Project, Role
from labeling.services import membership_set, partition_freeze

SAMPLE_WORKLOAD = Path(__file__).resolve().parents[2] / "demo" / "sample_workload.jsonl"
DEMO_SLUG = "demo"
DEMO_NAME = "Demo: Larkspur Bay library and Quillfeather policies"
# Public on purpose (README "Demo"); accepted only with DEBUG on.
DEMO_PASSWORD = "certlabel-demo"  # noqa: S105
DEMO_MEMBERS = (
    ("manager", Role.MANAGER),
    ("annotator1", Role.ANNOTATOR),
    ("annotator2", Role.ANNOTATOR),
    ("adjudicator", Role.ADJUDICATOR),
)
# The split is grouped and frozen before any label (seed 003). Any fixed seed is reproducible;
# with the sample's 6 groups of questions, 2028 deals 2 / 5 / 5 questions, near the proportions.
PARTITION_PROPORTIONS = {"dev": 0.2, "calibration": 0.4, "test": 0.4}
PARTITION_SEED = 2028


class Command(BaseCommand):
    """Create the demo project, its members and its frozen partition (DEBUG only)."""

    help = "Create the demo project, users (printed password) and frozen partition. DEBUG only."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--password",
            default=DEMO_PASSWORD,
            help=f"password for every demo user (default: {DEMO_PASSWORD!r})",
        )
        parser.add_argument(
            "--url", default="http://127.0.0.1:8000/", help="base URL printed at the end"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.DEBUG:
            raise CommandError(
                "demo_setup creates users with a published password and runs only with "
                "DJANGO_DEBUG=true (the development default)."
            )
        password: str = options["password"]
        try:
            with transaction.atomic():
                call_command(
                    "import_workload",
                    str(SAMPLE_WORKLOAD),
                    project=DEMO_SLUG,
                    create=True,
                    name=DEMO_NAME,
                    no_progress=True,
                    stdout=self.stdout,
                    stderr=self.stderr,
                )
                project = Project.objects.get(slug=DEMO_SLUG)
                self._users(project, password)
                self._partition(project)
        except LabelingError as exc:
            raise CommandError(
                f"{exc.message} (an older demo database? delete it and run again)"
            ) from exc
        self._print_access(password, options["url"])

    def _users(self, project: Project, password: str) -> None:
        user_model = get_user_model()
        admin, _ = user_model.objects.get_or_create(
            username="admin", defaults={"email": "admin@example.org"}
        )
        admin.is_staff = admin.is_superuser = True
        admin.set_password(password)
        admin.save()
        for username, role in DEMO_MEMBERS:
            user, _ = user_model.objects.get_or_create(
                username=username, defaults={"email": f"{username}@example.org"}
            )
            user.set_password(password)
            user.save()
            membership_set(project=project, user=user, role=role)

    def _partition(self, project: Project) -> None:
        if project.partition_frozen_at is not None:
            self.stdout.write(f"partition: already frozen (seed {project.partition_seed})")
            return
        result = partition_freeze(
            project=project, proportions=PARTITION_PROPORTIONS, seed=PARTITION_SEED
        )
        counts = ", ".join(
            f"{name} {result.questions[name]} questions / {result.components[name]} groups"
            for name in result.questions
        )
        self.stdout.write(f"partition: frozen with seed {result.seed}: {counts}")

    def _print_access(self, password: str, url: str) -> None:
        base = url.rstrip("/")
        self.stdout.write("")
        self.stdout.write(self.style.SUCCESS(f"Demo project {DEMO_SLUG!r} is ready."))
        self.stdout.write(
            f"  open      {base}/   (admin: {base}/admin/, API docs: {base}/api/docs/)"
        )
        users = ["admin (superuser)"] + [f"{name} ({role})" for name, role in DEMO_MEMBERS]
        self.stdout.write(f"  users     {', '.join(users)}")
        self.stdout.write(f"  password  {password}")
