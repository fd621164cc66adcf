"""A real PostgreSQL outage: /api/ answers a JSON 503 with Retry-After, pages the styled 503.

A private PostgreSQL cluster (initdb + pg_ctl on a free port in a temporary directory; the
machine's server is never touched) is migrated and seeded, a live gunicorn serves it, the
cluster is stopped, and requests must get the 503s; the cluster is started again and service
resumes without restarting the server. Skipped without PostgreSQL's binaries or psycopg;
a failure instead when ``CERTLABEL_REQUIRE_SERVICES=1`` (as in CI).
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PG_BIN = Path(os.environ.get("CERTLABEL_PG_BIN", "/usr/lib/postgresql/15/bin"))
PASSWORD = "outage-test-password-1"  # noqa: S105

SEED = (
    f"PASSWORD = {PASSWORD!r}\n"
    + """
import json, django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0, interactive=False)
from django.contrib.auth import get_user_model
from labeling.services.tokens import api_token_create
from labeling.models import Role
from labeling.services import membership_set, project_create
user = get_user_model().objects.create_user("boss", password=PASSWORD)
project = project_create(slug="study", name="Study")
membership_set(project=project, user=user, role=Role.MANAGER)
print(json.dumps({"token": api_token_create(user=user, name="outage").secret}))
"""
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(command: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root: run them as the postgres user then."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *command]
    return command


class Cluster:
    """A private PostgreSQL cluster in ``directory`` on ``port``."""

    def __init__(self, directory: Path, port: int) -> None:
        self.directory, self.port = directory, port
        self.data = directory / "data"

    def run(self, *args: str) -> None:
        subprocess.run(_as_postgres([str(PG_BIN / args[0]), *args[1:]]), check=True, timeout=120)

    def init(self) -> None:
        self.run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = str(self.directory / "postgres.log")
        self.run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start")

    def stop(self) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    required = os.environ.get("CERTLABEL_REQUIRE_SERVICES") == "1"
    if not (PG_BIN / "initdb").exists() or shutil.which("runuser") is None:
        if required:
            pytest.fail(f"PostgreSQL binaries not found in {PG_BIN}")
        pytest.skip(f"PostgreSQL binaries not found in {PG_BIN}")
    pytest.importorskip("psycopg")
    # Not under pytest's tmp_path (private to root): the postgres user writes its data here.
    directory = Path(tempfile.mkdtemp(prefix="certlabel-pg-outage-"))
    os.chmod(directory, 0o777)
    cluster = Cluster(directory, _free_port())
    cluster.init()
    cluster.start()
    try:
        import psycopg

        with psycopg.connect(
            f"postgresql://postgres@127.0.0.1:{cluster.port}/postgres", autocommit=True
        ) as conn:
            conn.execute("CREATE DATABASE certlabel_outage")
        yield cluster
    finally:
        subprocess.run(
            _as_postgres(
                [str(PG_BIN / "pg_ctl"), "-D", str(cluster.data), "-m", "immediate", "stop"]
            ),
            check=False,
            capture_output=True,
        )
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def server(cluster: Cluster, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A gunicorn serving the private cluster's database (DEBUG off, as in production)."""
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:{cluster.port}/certlabel_outage",
        "DJANGO_SETTINGS_MODULE": "labeling.settings",
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": "outage-test-secret-key-0123456789abcdefghijklmnop",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_SECURE_COOKIES": "false",
        "CELERY_BROKER_URL": "memory://",
        "CELERY_TASK_ALWAYS_EAGER": "true",
        "CERTLABEL_RETRY_AFTER_SECONDS": "9",
        "CERTLABEL_RELEASE_ROOT": str(tmp_path / "releases"),
    }
    env.pop("CELERY_RESULT_BACKEND", None)
    seeded = subprocess.run(
        [sys.executable, "-c", SEED],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    token = json.loads(seeded.stdout.strip().splitlines()[-1])["token"]
    port = _free_port()
    gunicorn = Path(sys.executable).with_name("gunicorn")
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen(
        [str(gunicorn), "labeling.wsgi:application", "--bind", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/accounts/login/", timeout=30)  # noqa: S310
                break
            except OSError:
                assert process.poll() is None, (tmp_path / "server.log").read_text()
                time.sleep(0.5)
        yield {"base": base, "token": token}
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def _request(url: str, *, token: str | None = None, **kwargs: Any) -> tuple[int, Any, bytes]:
    headers = {"Authorization": f"Token {token}"} if token else {}
    request = urllib.request.Request(
        url, headers={**headers, **kwargs.pop("headers", {})}, **kwargs
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def _login_form(base: str) -> tuple[urllib.request.OpenerDirector, str]:
    """A cookie-keeping opener with the login page's CSRF token (the GET reads no database)."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(f"{base}/accounts/login/", timeout=30).read()
    csrf = next(cookie.value for cookie in jar if cookie.name == "csrftoken")
    return opener, csrf


def _post_login(
    opener: urllib.request.OpenerDirector, base: str, csrf: str
) -> tuple[int, Any, str]:
    body = urllib.parse.urlencode(
        {"username": "boss", "password": PASSWORD, "csrfmiddlewaretoken": csrf}
    ).encode()
    request = urllib.request.Request(
        f"{base}/accounts/login/", data=body, headers={"Referer": f"{base}/accounts/login/"}
    )
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode()


def test_a_postgresql_outage_is_a_503_and_service_resumes(cluster, server):
    base, token = server["base"], server["token"]
    status, _, body = _request(f"{base}/api/projects/", token=token)
    assert status == 200 and json.loads(body)["count"] == 1
    opener, csrf = _login_form(base)

    cluster.stop()

    status, headers, body = _request(f"{base}/api/projects/", token=token)
    assert status == 503
    assert headers["Content-Type"].startswith("application/json")
    assert headers["Retry-After"] == "9"
    error = json.loads(body)
    assert error["code"] == "service_unavailable"
    assert error["errors"] == [{"field": None, "reason": error["detail"]}]

    patch = json.dumps({"lease_minutes": 45}).encode()
    status, headers, body = _request(
        f"{base}/api/projects/study/settings/",
        token=token,
        data=patch,
        method="PATCH",
        headers={"Content-Type": "application/json"},
    )
    assert (status, json.loads(body)["code"]) == (503, "service_unavailable")

    status, headers, page = _post_login(opener, base, csrf)
    assert status == 503
    assert headers["Content-Type"].startswith("text/html")
    assert headers["Retry-After"] == "9"
    assert 'id="service-unavailable"' in page and 'class="site"' in page

    cluster.start()

    status, _, body = _request(f"{base}/api/projects/study/settings/", token=token)
    assert status == 200
    assert json.loads(body)["lease_minutes"] == 30  # the PATCH during the outage wrote nothing
    status, _, page = _post_login(opener, base, csrf)
    assert status == 200 and "boss" in page  # logged in, redirected to the project list
