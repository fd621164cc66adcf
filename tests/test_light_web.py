"""The web process stays light: NumPy, SciPy, PyArrow and pandas load only where used.

A gunicorn worker imports the URLconf, every view and the Celery tasks it sends; none of that may
load the statistics or the release tables (they load in the Celery worker, or in the request of a
page that computes, the first time one comes). Checked in a fresh interpreter (pytest itself has
loaded them): it imports what a web process imports, answers light requests, sends tasks and runs
the engine's recovery pass, then lists what got loaded and, for each heavy library, the project
code that imported it first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: Libraries a web process must not load until a request needs them.
HEAVY = ("numpy", "scipy", "pyarrow", "pandas", "krippendorff", "statsmodels")

_WEB_PROCESS_CODE = """
import importlib, json, os, pkgutil, sys, traceback

heavy = {heavy!r}
first_import = {{}}


class Recorder:
    # Records the project's frames that import a heavy library first (the failure says who).
    def find_spec(self, name, path=None, target=None):
        if name in heavy and name not in first_import:
            first_import[name] = [
                f"{{os.path.relpath(f.filename, {repo!r})}}:{{f.lineno}}"
                for f in traceback.extract_stack()
                if f.filename.startswith({repo!r}) and "site-packages" not in f.filename
            ]
        return None


sys.meta_path.insert(0, Recorder())

import django

django.setup()
from django.apps import apps
from django.conf import settings
from django.db import connection
from django.test.utils import setup_test_environment

setup_test_environment()
# The tables straight from the models (the migrations take half a minute here; what these
# requests read does not depend on them).
settings.MIGRATION_MODULES = {{app.label: None for app in apps.get_app_configs()}}
connection.creation.create_test_db(verbosity=0)

# What gunicorn loads: the WSGI application (it builds the API's parameter table) and the URLconf.
import labeling.wsgi
from django.urls import URLResolver, get_resolver


def resolve(resolver):
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            resolve(pattern)
        else:
            pattern.callback


importlib.import_module(settings.ROOT_URLCONF)
resolve(get_resolver())
for package in ("labeling.views", "labeling.api", "certification.views", "certification.api"):
    for info in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
        importlib.import_module(info.name)
from labeling.celery import app

app.loader.import_default_modules()

# Light requests, as a browser and an API client make them.
from django.contrib.auth import get_user_model
from django.test import Client

from labeling.models import Role
from labeling.services import membership_set, project_create

password = "light-web-password-1"
user = get_user_model().objects.create_user("light", password=password)
project = project_create(slug="light", name="Light")
membership_set(project=project, user=user, role=Role.MANAGER)
client = Client()
statuses = {{}}
for url in ("/health/live", "/health/ready", "/accounts/login/"):
    statuses[url] = client.get(url).status_code
statuses["POST /accounts/login/"] = client.post(
    "/accounts/login/", {{"username": "light", "password": password}}
).status_code
for url in ("/", "/p/light/", "/api/projects/"):
    statuses[url] = client.get(url).status_code

# Sending tasks (to the in-memory broker: nothing runs them here) and the recovery pass, the
# periodic work of an idle web process of the embedded default.
from certification.tasks import calibration_run_execute_task, derived_recompute_task
from labeling.apps import _recover_now

derived_recompute_task.delay(project.pk, "agreement")
calibration_run_execute_task.delay(0)
_recover_now()

loaded = sorted(name for name in heavy if name in sys.modules)
print(json.dumps({{"statuses": statuses, "loaded": loaded, "first_import": first_import}}))
"""


def _web_process_report(tmp_path: Path) -> dict:
    # The embedded defaults whatever this run points at (PostgreSQL, Redis, S3 in CI's second run).
    inherited = ("CERTLABEL_", "CELERY_", "DJANGO_", "DATABASE_")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(inherited)},
        "DJANGO_SETTINGS_MODULE": "labeling.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'light.sqlite3'}",
        # a broker that queues without running: sending a task must not load the statistics
        "CELERY_BROKER_URL": "memory://",
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "CERTLABEL_IN_PROCESS_THREAD": "false",
        "CERTLABEL_RELEASE_ROOT": str(tmp_path / "releases"),
        "CERTLABEL_JOB_ROOT": str(tmp_path / "jobs"),
    }
    code = _WEB_PROCESS_CODE.format(heavy=HEAVY, repo=str(REPO) + os.sep)
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-5000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_web_process_loads_no_heavy_library(tmp_path):
    # given a fresh interpreter set up as a web process (SQLite, a broker that only queues)
    # when it imports the WSGI application, the URLconf, every view and API module and the
    # tasks, answers light requests, sends tasks and runs the recovery pass
    report = _web_process_report(tmp_path)
    # then the requests were answered
    assert report["statuses"] == {
        "/health/live": 200,
        "/health/ready": 200,
        "/accounts/login/": 200,
        "POST /accounts/login/": 302,
        "/": 200,
        "/p/light/": 200,
        "/api/projects/": 200,
    }
    # and none of the heavy libraries was loaded (first_import names who imported one)
    assert report["loaded"] == [], json.dumps(report["first_import"], indent=2)
