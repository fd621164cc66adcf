"""``manage.py demo_setup``: a ready-to-label demo project with users, for development only.

Creates, idempotently:

- project ``demo`` from ``labeling/demo/sample_workload.jsonl`` (invented questions about a
  fictional town library and a fictional company), imported through ``import_workload``;
- users ``manager`` (who may also create projects), ``annotator1``, ``annotator2``,
  ``adjudicator`` with their project roles,
  and the superuser ``admin``, all with the demo password (printed);
- the grouped dev / calibration / test partition (0.2 / 0.4 / 0.4, fixed seed);
- labelling started (overlap 2, serving order ``partition``) and the invented labels of
  ``labeling/demo/sample_labels.json``: annotator1 and annotator2 label the first four items
  served to them through the real services, so the demo opens with two consensus items, two
  items in the disagreement queue and agreement figures.

The demo password is public, so the command refuses to run unless ``DEBUG`` is on.
Running it again changes nothing but the passwords, which it sets again.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from labeling.exceptions import LabelingError
from labeling.models import Annotation, Project, Role, SourceVersion
from labeling.services import (
    AnnotationInput,
    ClaimInput,
    EvidenceInput,
    annotation_submit,
    item_claim_next,
    membership_set,
    partition_freeze,
    project_labelling_start,
)

SAMPLE_WORKLOAD = Path(__file__).resolve().parents[2] / "demo" / "sample_workload.jsonl"
SAMPLE_LABELS = Path(__file__).resolve().parents[2] / "demo" / "sample_labels.json"
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
# The split is grouped (calibration and test share no group) and frozen before any label. Any
# fixed seed is reproducible; with the sample's 6 groups of questions, 2028 deals 2 / 5 / 5
# questions, near the proportions.
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
        # The setup runs imports and background work in-process, whose INFO lines (about 60,
        # one per task) would bury the summary: shown from --verbosity 2 on.
        if options["verbosity"] < 2:
            logging.disable(logging.INFO)
        try:
            self._setup(**options)
        finally:
            logging.disable(logging.NOTSET)

    def _setup(self, **options: Any) -> None:
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
                self._labelling(project)
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
        # The demo's manager may start studies of their own from the browser (New project).
        manager = user_model.objects.get(username="manager")
        manager.user_permissions.add(
            Permission.objects.get(content_type__app_label="labeling", codename="add_project")
        )

    def _partition(self, project: Project) -> None:
        if project.partition_frozen_at is not None:
            self.stdout.write(f"partition: already frozen (seed {project.partition_seed})")
            return
        result = partition_freeze(
            project=project, proportions=PARTITION_PROPORTIONS, seed=PARTITION_SEED, actor=None
        )
        counts = ", ".join(
            f"{name} {result.questions[name]} questions / {result.components[name]} groups"
            for name in result.questions
        )
        self.stdout.write(f"partition: frozen with seed {result.seed}: {counts}")

    def _labelling(self, project: Project) -> None:
        manager = get_user_model().objects.get(username="manager")
        if project.labelling_started_at is None:
            project = project_labelling_start(project=project, actor=manager)
            self.stdout.write("labelling: started (overlap 2, serving order 'partition')")
        if Annotation.objects.filter(item__project=project).exists():
            self.stdout.write("sample labels: already there")
            return
        items = json.loads(SAMPLE_LABELS.read_text(encoding="utf-8"))["items"]
        for username in ("annotator1", "annotator2"):
            annotator = get_user_model().objects.get(username=username)
            for _ in items:
                assignment = item_claim_next(project=project, actor=annotator)
                if assignment is None:  # pragma: no cover - the sample has enough items
                    raise CommandError("the demo queue ran out before the sample labels")
                candidate = assignment.item.candidate
                labels = items[f"{candidate.question.external_id}/{candidate.key}"][username]
                annotation_submit(
                    project=project,
                    assignment_id=assignment.pk,
                    actor=annotator,
                    data=self._annotation(candidate, labels),
                )
        self.stdout.write(
            f"sample labels: annotator1 and annotator2 labelled {len(items)} items "
            "(2 consensus, 2 in the disagreement queue)"
        )

    @staticmethod
    def _annotation(candidate: Any, labels: dict[str, Any]) -> AnnotationInput:
        """Labels of ``sample_labels.json``, each quote located in the pinned source."""
        versions = list(SourceVersion.objects.filter(retrievals__question=candidate.question_id))
        claims = []
        for claim, spec in zip(candidate.claims.order_by("index"), labels["claims"], strict=True):
            evidence = []
            for quote in spec["evidence"]:
                version = next(v for v in versions if quote in v.text)
                start = version.text.index(quote)
                evidence.append(
                    EvidenceInput(version.pk, start, start + len(quote), quote, unit="codepoint")
                )
            claims.append(ClaimInput(claim.pk, spec["label"], evidence=tuple(evidence)))
        return AnnotationInput(
            answer_label=labels["answer"],
            claims=tuple(claims),
            comment=labels.get("comment", ""),
        )

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
