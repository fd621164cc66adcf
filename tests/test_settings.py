"""labeling/settings.py reads everything from the environment and fails fast in production.

Each case starts a fresh interpreter, because settings are read once per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labeling.settings import DEV_SECRET_KEY

REPO = Path(__file__).resolve().parents[1]
LONG_KEY = "k3y-" + "x" * 60
# Variables the settings read; the parent's values (e.g. CI's DATABASE_URL) must not leak in.
SETTINGS_PREFIXES = ("DJANGO_", "DATABASE_URL", "CELERY_")
REPORT = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({'engine': s.DATABASES['default']['ENGINE'], 'debug': s.DEBUG, "
    "'broker': s.CELERY_BROKER_URL, 'eager': s.CELERY_TASK_ALWAYS_EAGER}))"
)


def run_setup(**env: str) -> subprocess.CompletedProcess[str]:
    """Run ``django.setup()`` in a new interpreter; ``env`` is all it gets of the settings vars."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(SETTINGS_PREFIXES)}
    clean.update(env, DJANGO_SETTINGS_MODULE="labeling.settings")
    return subprocess.run(
        [sys.executable, "-c", REPORT],
        cwd=REPO,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def report(**env: str) -> dict[str, object]:
    result = run_setup(**env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"DJANGO_DEBUG": "false"}, "DJANGO_SECRET_KEY"),
        ({"DJANGO_DEBUG": "false", "DJANGO_SECRET_KEY": DEV_SECRET_KEY}, "DJANGO_SECRET_KEY"),
        ({"DJANGO_DEBUG": "false", "DJANGO_SECRET_KEY": "short"}, "DJANGO_SECRET_KEY"),
        ({"DJANGO_DEBUG": "false", "DJANGO_SECRET_KEY": LONG_KEY}, "DJANGO_ALLOWED_HOSTS"),
    ],
    ids=["no-key", "dev-key", "short-key", "no-hosts"],
)
def test_production_without_secrets_refuses_to_start(env, names):
    # given DEBUG off and a missing or unsafe secret (or no hosts)
    # when Django starts
    result = run_setup(**env)
    # then it exits with ImproperlyConfigured naming the variable to set
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert names in result.stderr


def test_production_with_long_key_and_hosts_starts():
    settings = report(
        DJANGO_DEBUG="false", DJANGO_SECRET_KEY=LONG_KEY, DJANGO_ALLOWED_HOSTS="labels.example.org"
    )
    assert settings["debug"] is False


def test_no_environment_means_sqlite_and_eager_celery():
    settings = report()
    assert settings == {
        "engine": "django.db.backends.sqlite3",
        "debug": True,
        "broker": "memory://",
        "eager": True,
    }


def test_database_url_selects_postgresql():
    settings = report(DATABASE_URL="postgres://certlabel@db.example.org:5432/certlabel")
    assert settings["engine"] == "django.db.backends.postgresql"


def test_redis_broker_turns_eager_execution_off():
    settings = report(CELERY_BROKER_URL="redis://127.0.0.1:6379/0")
    assert settings["broker"] == "redis://127.0.0.1:6379/0"
    assert settings["eager"] is False
