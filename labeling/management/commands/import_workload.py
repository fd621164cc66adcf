"""``manage.py import_workload PATH [PATH ...] --project SLUG [--format F] [--claims C]``.

A format that reads directories (``release``) takes a directory as PATH as well as a file.
``--claims sentences|whole`` chooses the claim splitting of a format whose answers come without
claims (see ``labeling.importers.claims``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import IntegrityError, OperationalError, transaction
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from labeling.exceptions import InvalidInput, LabelingError, WorkloadImportFailed
from labeling.importers import claims_choice_error, evaluator_version_error, formats
from labeling.importers.claims import CLAIM_MODES
from labeling.models import Project
from labeling.services import project_create, workload_import_file
from labeling.services.imports import MAX_ERRORS, ImportResult, workload_import_directory


class Command(BaseCommand):
    """Import workload files into a project, atomically: all files or nothing."""

    help = (
        "Import workload files (native JSONL or a dataset adapter) into a project. All files are "
        "imported in one transaction: any invalid record refuses everything."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path)
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument(
            "--format", default="native", choices=sorted(formats()), help="input format"
        )
        parser.add_argument(
            "--claims",
            choices=list(CLAIM_MODES),
            default=None,
            help="claim splitting for formats whose answers come without claims: "
            + "; ".join(f"{name}: {what}" for name, what in CLAIM_MODES.items())
            + " (default sentences)",
        )
        parser.add_argument(
            "--evaluator-version",
            default=None,
            help="the version of the evaluator whose scores the file carries (ragas: the score "
            "columns), e.g. ragas-0.2.6",
        )
        parser.add_argument(
            "--create", action="store_true", help="create the project if it does not exist"
        )
        parser.add_argument("--name", default="", help="project name when --create makes it")
        parser.add_argument(
            "--manager",
            default="",
            help="username made manager of the project --create makes (e.g. a restored release)",
        )
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        fmt = formats()[options["format"]]
        refused = claims_choice_error(fmt.name, options["claims"])
        if refused is not None:
            raise CommandError(f"--claims: {refused}")
        refused = evaluator_version_error(fmt.name, options["evaluator_version"])
        if refused is not None:
            raise CommandError(f"--evaluator-version: {refused}")
        for path in options["paths"]:
            if not path.exists():
                raise CommandError(f"{path}: no such file")
            if path.is_dir() and fmt.reads_directories:
                continue
            if not path.is_file():
                raise CommandError(f"{path}: not a regular file")
        reports: list[str] = []
        current = options["paths"][0]
        try:
            # Log lines are written above the progress bar instead of through it.
            with logging_redirect_tqdm(), transaction.atomic():
                project = self._project(options, fmt)
                for current in options["paths"]:
                    reports.append(self._import_one(project, fmt, current, options))
        except WorkloadImportFailed as exc:
            for error in exc.errors:
                self.stderr.write(f"{current.name}: {error}")
            more = " (reading stopped at the limit)" if len(exc.errors) >= MAX_ERRORS else ""
            raise CommandError(
                f"import refused: {len(exc.errors)} error(s) above{more}; nothing was written"
            ) from exc
        except LabelingError as exc:
            raise CommandError(f"{current.name}: {exc.message}") from exc
        except OperationalError as exc:
            # SQLite: another import held the database longer than the busy timeout.
            raise CommandError(
                f"{current.name}: the database stayed busy ({exc}); another import may be "
                "running. Nothing was written; run the import again when it has finished."
            ) from exc
        # Reported only now: until the transaction commits, nothing is imported.
        for report in reports:
            self.stdout.write(report)

    def _project(self, options: dict[str, Any], fmt: Any) -> Project:
        """Return the target project, creating it with ``--create`` (race-safe)."""
        slug = options["project"]
        project = Project.objects.filter(slug=slug).first()
        if project is not None:
            return project
        if not options["create"]:
            raise CommandError(f"no project {slug!r}; pass --create to make it")
        manager = None
        if options["manager"]:
            user_model = get_user_model()
            manager = user_model.objects.filter(
                **{user_model.USERNAME_FIELD: options["manager"]}
            ).first()
            if manager is None:
                raise CommandError(f"no user {options['manager']!r} (--manager)")
        try:
            return project_create(
                slug=slug,
                name=options["name"] or slug,
                preset=fmt.policy_preset,
                manager=manager,
            )
        except (IntegrityError, InvalidInput):
            # A concurrent run created it first (project_create's savepoint was rolled back).
            project = Project.objects.filter(slug=slug).first()
            if project is None:
                raise
            return project

    def _import_one(self, project: Project, fmt: Any, path: Path, options: dict[str, Any]) -> str:
        if path.is_dir():
            result = workload_import_directory(
                project=project,
                directory=path,
                format_name=fmt.name,
                actor=None,
                claims=options["claims"],
                evaluator_version=options["evaluator_version"],
            )
        else:
            result = self._import_file(project, fmt, path, options)
        if result.batch is None:
            return f"{path.name}: {result.records} records, nothing new; nothing changed"
        if result.already_imported:
            return f"{path.name}: already imported (batch #{result.batch.pk}); nothing changed"
        summary = json.dumps({"created": result.created, "notes": result.notes}, ensure_ascii=False)
        return f"{path.name}: batch #{result.batch.pk}, {result.records} records {summary}"

    def _import_file(
        self, project: Project, fmt: Any, path: Path, options: dict[str, Any]
    ) -> ImportResult:
        with (
            path.open("rb") as stream,
            tqdm(
                total=path.stat().st_size,
                unit="B",
                unit_scale=True,
                desc=path.name,
                disable=options["no_progress"],
                file=self.stderr._out,
            ) as bar,
        ):
            result = workload_import_file(
                project=project,
                stream=stream,
                format_name=fmt.name,
                filename=path.name,
                actor=None,
                progress=bar.update,
                claims=options["claims"],
                evaluator_version=options["evaluator_version"],
            )
        return result
