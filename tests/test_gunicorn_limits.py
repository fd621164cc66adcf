"""A long request line reaches Django under the project's gunicorn settings (a real gunicorn)."""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LONG_QUERY = "q=" + "x" * 6000  # beyond gunicorn's default request line (4094 bytes)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int, path: str) -> tuple[int, str, bytes]:
    deadline = time.monotonic() + 60
    while True:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.request("GET", path)
            response = connection.getresponse()
            return response.status, response.getheader("Content-Type", ""), response.read()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


@pytest.mark.parametrize("config", [True, False], ids=["project settings", "gunicorn defaults"])
def test_a_long_request_line_is_answered_by_the_api(tmp_path, config):
    # given gunicorn serving the application, with or without the project's settings
    gunicorn = Path(sys.executable).with_name("gunicorn")
    if not gunicorn.exists():
        pytest.skip("gunicorn is not installed")
    port = _free_port()
    command = [str(gunicorn), "labeling.wsgi:application", "--bind", f"127.0.0.1:{port}"]
    command += ["--workers", "1", "--log-level", "warning"]
    if config:
        command += ["--config", "python:labeling.gunicorn_conf"]
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    server = subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.DEVNULL)  # noqa: S603
    try:
        # when a request's line is 6,000 bytes long
        status, content_type, body = _get(port, f"/api/projects/?{LONG_QUERY}")
    finally:
        server.terminate()
        server.wait(timeout=30)
    # then the API answers it with its JSON error; gunicorn's defaults answered an HTML 400
    if config:
        assert (status, content_type) == (401, "application/json"), body[:200]
        assert b'"code"' in body
    else:
        assert status == 400 and not content_type.startswith("application/json")
