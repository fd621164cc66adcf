"""``manage.py apply_certificate --project SLUG --run ID [--input FILE] [--output FILE]``.

Reads questions as JSONL (one question per line, the body of ``POST .../runs/<id>/apply/``
without its ``questions`` list: ``{"id": ..., "candidates": [...]}``) from a file or stdin, and
writes one decision record per line, in input order, to stdout or a file. Every line is checked
before anything is written: errors name the line and the field (``line 3: candidates[0].score:
must be a number or null``), at most :data:`MAX_ERRORS` of them, and the command exits non-zero
writing nothing. Blank lines are skipped. The run must be done, computed by this server's
statistics version, and certify an operating point; ``--method`` applies one method of a spec
with method ``both`` alone (``selective_risk`` or ``conformal_set``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from django.core.management.base import BaseCommand, CommandError, CommandParser

from certification.certificates.apply import (
    METHODS,
    InvalidQuestion,
    certificate_apply,
    question_parse,
)
from certification.selectors import calibration_run_get
from certification.services import calibration_run_certificate
from certification.services.calibration_apply import frequency_ranks_fill
from labeling.exceptions import LabelingError
from labeling.models import Project

#: Errors listed before the command stops reading.
MAX_ERRORS = 20


def _questions(lines: Iterable[str], contract: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Parse every line; return the questions and the errors (``line N: field: reason``)."""
    questions: list[dict[str, Any]] = []
    errors: list[str] = []
    seen: dict[tuple[str, Any], int] = {}
    for number, line in enumerate(lines, start=1):
        if len(errors) >= MAX_ERRORS:
            errors.append(f"stopped after {MAX_ERRORS} errors")
            break
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as refused:
            errors.append(f"line {number}: not JSON ({refused.msg}, column {refused.colno})")
            continue
        try:
            question = frequency_ranks_fill(raw, question_parse(raw, contract), contract)
        except InvalidQuestion as refused:
            errors.append(f"line {number}: {refused}")
            continue
        key = (type(question["id"]).__name__, question["id"])
        if key in seen:
            errors.append(f"line {number}: id: {question['id']!r} is also line {seen[key]}")
            continue
        seen[key] = number
        questions.append(question)
    return questions, errors


class Command(BaseCommand):
    """Apply a done run's certificate to questions read as JSONL; write decisions as JSONL."""

    help = (
        "Apply a done calibration run's certificate to questions (JSONL, one per line) and "
        "write one decision per line: accept/abstain at the certified threshold, the top-M* "
        "prediction set."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        """Project, run, input and output."""
        parser.add_argument("--project", required=True, help="The project's slug.")
        parser.add_argument("--run", type=int, required=True, help="The calibration run's id.")
        parser.add_argument(
            "--input", default="-", help="A JSONL file of questions; '-' (default): stdin."
        )
        parser.add_argument(
            "--output", default="-", help="Where to write the decisions; '-' (default): stdout."
        )
        parser.add_argument(
            "--method",
            choices=METHODS,
            help="Apply one method of a spec with method both alone (default: every method).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Validate every line, then decide and write."""
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project {options['project']!r}")
        try:
            run = calibration_run_get(project=project, run_id=options["run"])
            certificate = calibration_run_certificate(run=run, method=options["method"])
        except LabelingError as refused:
            raise CommandError(refused.message) from None
        source = options["input"]
        try:
            if source == "-":
                questions, errors = _questions(sys.stdin, certificate.contract)
            else:
                with Path(source).open(encoding="utf-8") as stream:
                    questions, errors = _questions(stream, certificate.contract)
        except (OSError, UnicodeDecodeError) as refused:
            raise CommandError(f"cannot read {source}: {refused}") from None
        if errors:
            raise CommandError("nothing written:\n" + "\n".join(errors))
        records = certificate_apply(certificate, questions)
        if options["output"] == "-":
            self._write(self.stdout, records)
        else:
            with Path(options["output"]).open("w", encoding="utf-8", newline="\n") as stream:
                self._write(stream, records)
            self.stderr.write(f"{len(records)} decision(s) written to {options['output']}")

    @staticmethod
    def _write(stream: Any, records: list[dict[str, Any]]) -> None:
        out: TextIO = stream
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
