"""manage.py import_workload: the command line of the native import."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from labeling.models import ImportBatch, Project, Question
from tests.conftest import jsonl_bytes, native_record

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("import_workload", *args, "--no-progress", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_creates_project_imports_and_reports_counts(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_bytes(jsonl_bytes([native_record("q1"), native_record("q2")]))
    out, _ = run(str(path), "--project", "new", "--create")
    assert out.startswith("w.jsonl: batch #")
    assert '"questions": 2' in out
    assert Project.objects.get(slug="new").policies.count() == 1
    out, _ = run(str(path), "--project", "new")
    assert "already imported" in out and Question.objects.count() == 2


def test_failure_in_a_later_file_names_it_and_rolls_back_every_file(tmp_path):
    good, bad = tmp_path / "ok.jsonl", tmp_path / "broken.jsonl"
    good.write_bytes(jsonl_bytes([native_record("q1")]))
    bad.write_bytes(jsonl_bytes([native_record("q2")]) + b"{oops\n")
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError, match="1 error\\(s\\) above; nothing was written"):
        call_command(
            "import_workload", str(good), str(bad), "--project", "p", "--create",
            "--no-progress", stdout=out, stderr=err,
        )  # fmt: skip
    assert err.getvalue().startswith("broken.jsonl: line 2: field (line): invalid JSON")
    assert out.getvalue() == ""  # no batch is claimed before the transaction commits
    assert not Project.objects.filter(slug="p").exists()
    assert ImportBatch.objects.count() == 0


def test_missing_project_needs_create(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_bytes(jsonl_bytes([native_record()]))
    with pytest.raises(CommandError, match="pass --create"):
        run(str(path), "--project", "nope")


@pytest.mark.parametrize(
    ("target", "message"), [("missing.jsonl", "no such file"), (".", "not a regular file")]
)
def test_path_must_be_a_file(tmp_path, target, message):
    with pytest.raises(CommandError, match=message):
        run(str(tmp_path / target), "--project", "p", "--create")
