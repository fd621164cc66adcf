"""Log lines carry the context fields that the log calls pass with ``extra=``."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labeling.logformat import JsonFormatter, KeyValueFormatter, record_context

REPO = Path(__file__).resolve().parents[1]


def _emit(formatter: logging.Formatter, *args, **kwargs) -> str:
    """Log through a real logger and handler; return what the handler wrote."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    logger = logging.getLogger(f"tests.logging.{id(stream)}")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        logger.warning(*args, **kwargs)
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


def test_key_value_line_ends_with_every_extra_field():
    formatter = KeyValueFormatter("%(levelname)s %(name)s %(message)s")
    line = _emit(
        formatter,
        "source_versions_verify.mismatch",
        extra={"project": "study", "versions": [3, 9], "error": "no such run", "run_id": 12},
    )
    assert line.startswith("WARNING tests.logging.")
    assert line.rstrip("\n").endswith(
        'source_versions_verify.mismatch project=study versions=[3,9] error="no such run" run_id=12'
    )


def test_key_value_line_without_extra_is_the_plain_format():
    line = _emit(KeyValueFormatter("%(levelname)s %(message)s"), "hello %s", "world")
    assert line == "WARNING hello world\n"


def test_key_value_traceback_follows_the_fields():
    try:
        raise ValueError("boom")
    except ValueError:
        line = _emit(KeyValueFormatter("%(message)s"), "task.crashed", exc_info=True,
                     extra={"run_id": 5})  # fmt: skip
    first, *rest = line.splitlines()
    assert first == "task.crashed run_id=5"
    assert rest[0] == "Traceback (most recent call last):"
    assert rest[-1] == "ValueError: boom"


def test_json_line_holds_message_level_logger_and_extra_fields():
    line = _emit(JsonFormatter(), "release_build.done", extra={"build_id": 7, "matches": True})
    assert line.count("\n") == 1
    record = json.loads(line)
    assert record["message"] == "release_build.done"
    assert record["level"] == "WARNING"
    assert record["logger"].startswith("tests.logging.")
    assert record["build_id"] == 7 and record["matches"] is True
    assert record["time"].endswith("+00:00")


def test_json_keeps_a_traceback_and_stringifies_what_json_cannot_encode():
    try:
        raise KeyError("k")
    except KeyError:
        line = _emit(JsonFormatter(), "oops", exc_info=True, extra={"path": Path("/x/y")})
    record = json.loads(line)
    assert record["path"] == "/x/y"
    assert record["exc_info"].startswith("Traceback") and "KeyError: 'k'" in record["exc_info"]


def test_record_context_is_only_what_extra_added():
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "msg", None, None)
    assert record_context(record) == {}
    record.__dict__.update(project_id=3)
    assert record_context(record) == {"project_id": 3}


def _log_from_django(log_format: str | None) -> subprocess.CompletedProcess[str]:
    """Start Django in a fresh interpreter (settings are read once) and log one record."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "DATABASE_URL", "CELERY_", "CERTLABEL_LOG_FORMAT"))
    }
    env["DJANGO_SETTINGS_MODULE"] = "labeling.settings"
    if log_format is not None:
        env["CERTLABEL_LOG_FORMAT"] = log_format
    code = (
        "import logging, django; django.setup(); "
        "logging.getLogger('labeling.tasks').warning("
        "'source_versions_verify.missing_project', extra={'project_id': 42})"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_settings_default_is_key_value_with_the_ids():
    result = _log_from_django(None)
    assert result.returncode == 0, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert " WARNING labeling.tasks source_versions_verify.missing_project project_id=42" in line


def test_settings_json_format_from_the_environment():
    result = _log_from_django("json")
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stderr.strip().splitlines()[-1])
    assert record["message"] == "source_versions_verify.missing_project"
    assert record["logger"] == "labeling.tasks"
    assert record["project_id"] == 42


@pytest.mark.parametrize("value", ["xml", ""])
def test_settings_refuse_an_unknown_log_format(value):
    result = _log_from_django(value)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "CERTLABEL_LOG_FORMAT" in result.stderr
