"""``manage.py certify --project SLUG --spec ID [--json]``: run a spec, print its report.

The run is requested like any other (same inputs -> the existing run, no recomputation) and,
when it is new, computed in this process (a Celery worker that picks it up first is waited for).
``--run ID`` prints a stored run instead; ``--verify`` rebuilds its numbers from the stored inputs
and fails when they differ. The text report has the sections of the run page; ``--json`` prints
the API's report (``certification.selectors.calibration_run_report``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from certification.models import CalibrationRun, RunStatus, RunTrigger
from certification.selectors import (
    calibration_run_get,
    calibration_run_report,
    calibration_spec_get,
)
from certification.services import (
    calibration_run_execute,
    calibration_run_rebuild,
    calibration_run_request,
)
from labeling.exceptions import LabelingError
from labeling.models import Project

#: How long to wait for a worker that is computing the run, in seconds.
WAIT_SECONDS = 600


def _n(value: Any, digits: int = 4) -> str:
    if value is None:
        return "—"
    if value in ("inf", "-inf"):
        return "∞" if value == "inf" else "−∞"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    try:
        return f"{float(value):.{digits}g}"
    except (TypeError, ValueError):
        return str(value)


def _pct(value: Any) -> str:
    return "—" if value is None else f"{100 * float(value):.2f}%"


def _table(headers: list[str], rows: list[list[str]]) -> Iterator[str]:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    yield "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    yield "  ".join("-" * w for w in widths)
    for row in rows:
        yield "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))


def report_lines(report: Mapping[str, Any]) -> Iterator[str]:
    """The text form of a run report: the run page's sections, in order."""
    run, spec, result = report["run"], report["spec"], report["result"]
    yield f"Calibration run {run['id']} of {spec['name']} v{spec['version']} — {run['status']}"
    yield f"  spec sha256   {run['spec_sha256']}"
    yield f"  input sha256  {run['input_sha256']}"
    yield f"  trigger       {run['trigger']}   requested {run['created_at']}"
    if run["error"]:
        yield f"  FAILED: {run['error']} (no certificate)"
    if not result:
        return
    yield ""
    yield f"Outcome: {result['outcome']}"
    pending = result["pending"]
    if result["covers_only_resolved"]:
        yield (
            f"  {pending['calibration']} calibration candidate(s) not resolved yet, excluded: "
            "the certificate covers only the resolved items of this snapshot."
        )
    s = result.get("selective_risk")
    if s:
        yield ""
        yield "Selective-risk certificate"
        if s["chosen_index"] is not None:
            yield (
                f"  certified operating point: accept iff {s['score_field']} {s['acceptance']} "
                f"{s['chosen_threshold']} ({len(s['certified_indices'])} of {s['n_thresholds']} "
                f"certified, chosen by {s['utility']})"
            )
        else:
            yield f"  no certified operating point: {s['reason']}"
        counts = s["counts"]
        excluded = ", ".join(f"{k} {v}" for k, v in counts["excluded"].items()) or "none"
        bounded = s.get("p_value_test") == "hoeffding_bentkus"
        if bounded:
            loss = s["loss"]
            field = f" ({loss['field']})" if "field" in loss else ""
            yield (
                f"  loss bounded in [0, 1]: {loss['source']}{field}; Hoeffding–Bentkus p-values "
                f"and bounds; total loss of used answers {_n(counts['loss_sum'])}"
            )
        yield (
            f"  alpha {s['alpha']}  delta {s['delta']}  {s['multiplicity']}  per-test level "
            f"{_n(s['test_level'], 6)}  bound confidence {_n(s['bound_confidence'], 6)}"
        )
        yield (
            f"  units {counts['units']}, used n = {counts['used']}, excluded {excluded}, "
            f"no answer {counts['no_answer']}, missing score {counts['missing_score']}"
        )
        rows = [
            [
                str(r["index"]),
                str(r["threshold"]),
                str(r["accepted"]),
                _n(r["loss_sum"]) if bounded else str(r["errors"]),
                str(r["denominator"]),
                _n(r["risk"]),
                _n(r["p_value"], 6),
                _n(r["upper_bound"], 6),
                "chosen"
                if r["index"] == s["chosen_index"]
                else (
                    "certified" if r["certified"] else ("not tested" if not r["tested"] else "no")
                ),
            ]
            for r in s["rows"]
        ]
        for line in _table(
            ["#", "threshold", "m", "loss" if bounded else "k", "denom", "risk", "p-value"]
            + ["upper", "decision"],
            rows,
        ):
            yield "  " + line
    c = result.get("conformal")
    if c:
        yield ""
        yield "Conformal prediction sets"
        if c["threshold"]:
            t, rel = c["threshold"], c["reliability"]
            yield (
                f"  M* = {_n(t['value'])} (k = {t['k']} of n = {t['n']} at alpha {c['alpha']})"
                + (f" — {t['reason']}" if t["reason"] else "")
            )
            if rel["value"] is not None:
                yield (
                    f"  reliability level 1 - alpha* = {rel['level']} = {_n(rel['value'], 6)} "
                    f"({rel['n_mode_admissible']} modes admissible)"
                )
            else:
                yield f"  reliability level undefined: {rel['reason']}"
            for name in ("calibration_sets", "test_sets"):
                ev = c.get(name)
                if ev:
                    yield (
                        f"  {name.split('_')[0]}: coverage {ev['covered']}/{ev['n']} = "
                        f"{_pct(ev['coverage'])}, on solvable {ev['covered_solvable']}/"
                        f"{ev['n_solvable']}, mean set size {_n(ev['mean_set_size'])}"
                    )
        else:
            yield f"  no conformal threshold: {c['reason']}"
        counts = c["counts"]
        excluded = ", ".join(f"{k} {v}" for k, v in counts["excluded"].items()) or "none"
        yield (
            f"  questions {counts['questions']}, used {counts['used']}, excluded {excluded}, "
            f"unsolvable {counts['unsolvable']}, samples saved by stopping "
            f"{counts['stopping']['samples_saved']}"
        )
    h = result.get("heldout")
    if h:
        yield ""
        yield f"Held-out report (test partition): {h['policy']}"
        excluded = ", ".join(f"{k} {v}" for k, v in h["excluded"].items()) or "none"
        yield f"  units {h['units']}, excluded {excluded}"
        rows = [
            [
                m["name"],
                str(m["numerator"]),
                str(m["denominator"]),
                m["unit"],
                _pct(m["value"]),
                f"[{_pct(m['lower'])}, {_pct(m['upper'])}]" if m["lower"] is not None else "—",
            ]
            for m in h["report"]["metrics"]
        ]
        for line in _table(["metric", "num", "den", "unit", "value", "exact interval"], rows):
            yield "  " + line
    r = result.get("rccs") or {}
    yield ""
    if r.get("reason"):
        yield f"RCCS: undefined ({r['reason']})"
    else:
        yield (
            f"RCCS: correlation {_n(r['rccs_correlation'])}"
            + (f" ({r['correlation_reason']})" if r["correlation_reason"] else "")
            + f", calibration error {_n(r['confidence_calibration_error'])}, mean R*C "
            f"{_n(r['mean_rc'])}, n {r['n']} (dropped {r['n_dropped']})"
        )
    grouping = (result.get("dependence") or {}).get("grouping") or {}
    if grouping:
        yield (
            f"Dependence: ICC {_n(grouping.get('icc'))}, design effect "
            f"{_n(grouping.get('design_effect'))}, effective n {_n(grouping.get('effective_n'))} "
            f"of {grouping.get('n')}"
            + (f" ({grouping['reason']})" if grouping.get("reason") else "")
        )
    yield from _ties_lines(result.get("dependence") or {})
    yield ""
    yield "Guarantee ledger"
    for row in result["ledger"]:
        yield f"  {row['title']}: {row['value']}"


def _ties_lines(dependence: dict[str, Any]) -> Iterator[str]:
    """The coverage section's tie note: which spreads apply when the scores are tied."""
    ties = dependence.get("ties") or {}
    if not ties.get("tied"):
        return
    yield (
        f"Coverage spread: tied scores ({ties['tied_rows']} of {ties['n']} share a value, "
        f"{ties['distinct']} distinct): the Beta and Beta-Binomial spreads do not apply"
    )
    split = dependence.get("tied_split") or {}
    if split and not split.get("reason"):
        yield (
            f"  tie-aware (exact random-split law): mean {_n(split['mean'])}, sd {_n(split['sd'])}"
        )
    reason = (dependence.get("simulation") or {}).get("predicted_reason")
    if reason:
        yield f"  predicted excess: {reason}"


class Command(BaseCommand):
    """Run a calibration spec on the current labels and print its report."""

    help = (
        "Run a calibration spec on the current resolved labels (or show a stored run) and print "
        "the report: certificate, conformal threshold, held-out report, guarantee ledger."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--spec", type=int, help="spec id: run it on the current labels")
        target.add_argument("--run", type=int, help="run id: print a stored run")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument(
            "--verify", action="store_true", help="rebuild the numbers and compare (exit 1 if not)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project {options['project']!r}")
        try:
            if options["spec"] is not None:
                run = self._run_spec(project, options["spec"])
            else:
                run = calibration_run_get(project=project, run_id=options["run"])
        except LabelingError as exc:
            raise CommandError(exc.message) from exc
        report = calibration_run_report(run=run)
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2, ensure_ascii=False))
        else:
            for line in report_lines(report):
                self.stdout.write(line)
        if options["verify"]:
            if not calibration_run_rebuild(run=run):
                raise CommandError(f"run {run.pk}: the stored result does not rebuild")
            self.stderr.write(f"run {run.pk}: every number rebuilds from the stored inputs")
        if run.status == RunStatus.FAILED:
            raise CommandError(f"run {run.pk} failed: {run.error}")

    def _run_spec(self, project: Project, spec_id: int) -> CalibrationRun:
        spec = calibration_spec_get(project=project, spec_id=spec_id)
        with transaction.atomic():
            run = calibration_run_request(spec=spec, trigger=RunTrigger.COMMAND)
        run = calibration_run_execute(run_id=run.pk)
        waited = 0.0
        while run.status in (RunStatus.PENDING, RunStatus.RUNNING) and waited < WAIT_SECONDS:
            time.sleep(0.5)
            waited += 0.5
            run.refresh_from_db()
        if not run.is_finished:
            raise CommandError(f"run {run.pk} is still {run.status} after {WAIT_SECONDS} s")
        return calibration_run_get(project=project, run_id=run.pk)
