"""``manage.py audit_evaluator --project SLUG --evaluator NAME@VERSION``: audit an evaluator.

Declares the audit when ``--positive``/``--human-positive``/``--threshold`` is given or when
none exists yet (defaults: ``inadmissible`` on both sides), recomputes it from the current
resolved labels (no write when nothing changed) and prints the report: the confusion matrix,
the metrics with exact intervals, the three error-rate estimates and the disagreement count.
``--sample N --seed S [--slice DIM]`` then draws a seeded stratified audit sample of N items
(served first to annotators) and recomputes with its design. ``--json`` prints the stored result
(the API's ``result``).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from certification.exceptions import AuditNotConfigured
from certification.formatting import p_value_text
from certification.selectors import audit_report_get, evaluator_get_by_spec
from certification.services import (
    audit_report_configure,
    audit_report_recompute,
    audit_sample_draw,
)
from labeling.exceptions import LabelingError
from labeling.models import Project

METRICS = ("accuracy", "sensitivity", "specificity", "ppv", "npv")


def _n(value: Any) -> str:
    return "—" if value is None else f"{float(value):.4f}"


def _prop(m: dict[str, Any]) -> str:
    if m.get("value") is None:
        return f"undefined ({m.get('reason')})"
    interval = m.get("interval") or {}
    return (
        f"{_n(m['value'])}  {m['numerator']}/{m['denominator']}  "
        f"[{_n(interval.get('lower'))}, {_n(interval.get('upper'))}]"
    )


def render_text(report: Any) -> list[str]:
    """The report as lines of text."""
    result = report.result
    metrics = result["metrics"]
    matrix = metrics["matrix"]
    lines = [
        f"Audit of {report.evaluator} ({result['n_items']} items, "
        f"{result['n_resolved']} resolved, {result.get('n_pending', 0)} pending); "
        f"confidence {result['declaration']['confidence']}",
        "",
        "Confusion matrix (rows evaluator, columns people):",
        "  " + " ".join(f"{h:>14}" for h in ["", *matrix["human_labels"]]),
    ]
    for label, row in zip(matrix["evaluator_labels"], matrix["counts"], strict=True):
        lines.append("  " + " ".join(f"{c:>14}" for c in [label, *map(str, row)]))
    lines.append("")
    lines += [f"{name:<12} {_prop(metrics[name])}" for name in METRICS]
    kappa = metrics["kappa"]
    lines.append(
        f"{'kappa':<12} {_n(kappa['kappa'])}  SE {_n(kappa['se'])}  "
        f"[{_n(kappa['ci_low'])}, {_n(kappa['ci_high'])}]"
        + (f"  undefined ({kappa['reason']})" if kappa["kappa"] is None else "")
        + (f"  interval {kappa['interval_reason']}" if kappa.get("interval_reason") else "")
    )
    lines.append(f"{'McNemar':<12} p = {p_value_text(metrics['mcnemar']['p_value'])}")
    lines.append("")
    error_rate = result["error_rate"]
    if "summaries" in error_rate:
        lines.append("Error rate of the workload:")
        for s in error_rate["summaries"]:
            lines.append(
                f"  {s['method']:<20} estimate {_n(s['estimate'])}  "
                f"[{_n(s['lower'])}, {_n(s['upper'])}]  upper bound {_n(s['upper_bound'])}  "
                f"({s['assumption']}{'; ' + s['reason'] if s['reason'] else ''}"
                f"{'; ' + s['note'] if s.get('note') else ''})"
            )
    else:
        lines.append(f"Error rate: undefined ({error_rate.get('reason')})")
    lines.append(f"Disagreements: {len(result['disagreements'])}")
    return lines


class Command(BaseCommand):
    """Audit one evaluator version against the resolved human labels."""

    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        """Declare the options."""
        parser.add_argument("--project", required=True, help="Project slug.")
        parser.add_argument("--evaluator", required=True, help="NAME@VERSION.")
        parser.add_argument(
            "--positive", action="append", help="Evaluator label counted positive (repeatable)."
        )
        parser.add_argument(
            "--human-positive",
            action="append",
            help="Resolved answer label counted positive (repeatable; default inadmissible).",
        )
        parser.add_argument("--threshold", type=float, help="Score threshold of the flag.")
        parser.add_argument(
            "--flag-when", default="<", choices=["<", "<=", ">", ">="], help="score <op> t flags."
        )
        parser.add_argument("--confidence", default="0.95", help="Interval level (0, 1).")
        parser.add_argument("--sample", type=int, help="Draw an audit sample of this size.")
        parser.add_argument("--seed", type=int, default=0, help="Seed of the sample.")
        parser.add_argument(
            "--slice",
            default="",
            choices=["", "domain", "question_type", "generator"],
            help="Slice dimension of the sample's strata (besides the verdict).",
        )
        parser.add_argument("--json", action="store_true", help="Print the result as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        """Declare or recompute, then print."""
        try:
            project = Project.objects.get(slug=options["project"])
        except Project.DoesNotExist as exc:
            raise CommandError(f"no project {options['project']!r}") from exc
        try:
            evaluator = evaluator_get_by_spec(project=project, spec=options["evaluator"])
            # Any declaration option given (anything but its default) re-declares the audit.
            declare = bool(
                options["positive"]
                or options["human_positive"]
                or options["threshold"] is not None
                or options["confidence"] != "0.95"
                or options["flag_when"] != "<"
            )
            if not declare:
                try:
                    report = audit_report_get(project=project, evaluator=evaluator)
                except AuditNotConfigured:
                    declare = True
                else:
                    report = audit_report_recompute(report_id=report.pk)
            if declare:
                report = audit_report_configure(
                    project=project,
                    evaluator=evaluator,
                    actor=None,
                    human_positive=options["human_positive"],
                    evaluator_positive=options["positive"],
                    score_threshold=options["threshold"],
                    flag_when=options["flag_when"],
                    confidence=options["confidence"],
                )
            if options["sample"] is not None:
                sample = audit_sample_draw(
                    project=project,
                    evaluator=evaluator,
                    actor=None,
                    size=options["sample"],
                    seed=options["seed"],
                    slice_dimension=options["slice"],
                )
                report.refresh_from_db()
                self.stderr.write(f"Drew audit sample {sample.pk}: {sample.design}")
        except LabelingError as exc:
            raise CommandError(exc.message) from exc
        if options["json"]:
            self.stdout.write(json.dumps(report.result, indent=2, sort_keys=True))
        else:
            self.stdout.write("\n".join(render_text(report)))
