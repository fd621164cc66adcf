"""``manage.py import_evaluator_labels PATH --project SLUG``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.exceptions import LabelingError, WorkloadImportFailed
from labeling.models import Project
from labeling.services import evaluator_labels_import_file
from labeling.services.imports import MAX_ERRORS


class Command(BaseCommand):
    """Import an evaluator-label JSONL file into a project, atomically."""

    help = (
        "Import evaluator labels (one JSONL line per label of an imported candidate or claim) "
        "into a project. Atomic: any invalid line refuses the whole file."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path)
        parser.add_argument("--project", required=True, help="project slug")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["path"]
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project {options['project']!r}")
        try:
            with path.open("rb") as stream:
                result = evaluator_labels_import_file(
                    project=project, stream=stream, filename=path.name, actor=None
                )
        except WorkloadImportFailed as exc:
            for error in exc.errors:
                self.stderr.write(f"{path.name}: {error}")
            more = " (reading stopped at the limit)" if len(exc.errors) >= MAX_ERRORS else ""
            raise CommandError(
                f"import refused: {len(exc.errors)} error(s) above{more}; nothing was written"
            ) from exc
        except LabelingError as exc:
            raise CommandError(f"{path.name}: {exc.message}") from exc
        if result.batch is None:
            self.stdout.write(
                f"{path.name}: {result.records} records, nothing new; nothing changed"
            )
        elif result.already_imported:
            self.stdout.write(
                f"{path.name}: already imported (batch #{result.batch.pk}); nothing changed"
            )
        else:
            summary = json.dumps({"created": result.created}, ensure_ascii=False)
            self.stdout.write(
                f"{path.name}: batch #{result.batch.pk}, {result.records} records {summary}"
            )
