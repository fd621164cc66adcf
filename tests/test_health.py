"""The health endpoints: /health/live (process up) and /health/ready (what the process needs)."""

from __future__ import annotations

import socket
import time

import pytest
from django.core.files.storage import storages
from django.db import OperationalError

from labeling import health

pytestmark = pytest.mark.django_db

CHECKS = ["database", "cache", "broker", "storage.releases", "storage.jobs"]


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(client):
    start = time.monotonic()
    response = client.get("/health/ready")
    return response, time.monotonic() - start


def test_live_answers_ok_without_the_database_or_a_session(client, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = client.get("/health/live")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})
    assert "no-store" in response["Cache-Control"]
    assert "sessionid" not in response.cookies
    assert "Cookie" not in response.get("Vary", "")


def test_ready_answers_ok_with_every_check_on_the_test_settings(client):
    response, _ = _ready(client)
    body = response.json()
    assert (response.status_code, body["status"]) == (200, "ok")
    assert list(body["checks"]) == CHECKS
    assert all(c["ok"] and c["error"] is None for c in body["checks"].values())


def test_ready_names_the_cache_when_redis_is_away(client, settings):
    # given the cache on a Redis URL (with a password) where nothing listens, and a deployment
    # that takes a process out when its cache is away
    settings.CERTLABEL_READY_REQUIRES = CHECKS
    settings.CACHES = {
        "default": {
            "BACKEND": "labeling.cache.FallbackRedisCache",
            "LOCATION": f"redis://:s3cret-pw@127.0.0.1:{_dead_port()}/2",
        }
    }
    # when the process is asked whether it is ready (twice: Redis, then its back-off)
    for _ in range(2):
        response, seconds = _ready(client)
        # then it is not, the cache check says why, the rest pass, within a second
        body = response.json()
        assert (response.status_code, body["status"]) == (503, "unavailable")
        assert body["checks"]["cache"]["ok"] is False
        assert "Error" in body["checks"]["cache"]["error"]
        assert [n for n, c in body["checks"].items() if not c["ok"]] == ["cache"]
        assert seconds < 1.0
        # and neither the URL nor the password is shown
        assert "s3cret-pw" not in response.content.decode()
        assert "redis://" not in response.content.decode()


def test_ready_names_the_broker_when_it_is_away(client, settings):
    settings.CERTLABEL_READY_REQUIRES = CHECKS
    settings.CELERY_BROKER_URL = f"redis://:s3cret-pw@127.0.0.1:{_dead_port()}/0"
    response, seconds = _ready(client)
    body = response.json()
    assert response.status_code == 503
    assert [n for n, c in body["checks"].items() if not c["ok"]] == ["broker"]
    assert body["checks"]["broker"]["error"].startswith("OperationalError")
    assert "s3cret-pw" not in response.content.decode()
    assert seconds < 1.5


def test_a_broker_that_never_answers_is_given_up_after_a_second(client, settings):
    settings.CERTLABEL_READY_REQUIRES = CHECKS
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(16)
        settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{hung.getsockname()[1]}/0"
        response, seconds = _ready(client)
    assert response.status_code == 503
    assert response.json()["checks"]["broker"]["ok"] is False
    assert seconds < 2.0


def test_ready_names_a_failing_storage_and_the_database(client, monkeypatch):
    def refuse(name: str) -> bool:
        raise PermissionError(13, "Permission denied", "/srv/releases/certlabel-health-probe")

    def database_down() -> None:
        raise OperationalError('connection failed: password=hunter2 host=db.example.org "x"')

    monkeypatch.setattr(storages["releases"], "exists", refuse)
    monkeypatch.setattr(health, "check_database", database_down)
    response, _ = _ready(client)
    checks = response.json()["checks"]
    assert response.status_code == 503
    assert [n for n, c in checks.items() if not c["ok"]] == ["database", "storage.releases"]
    assert checks["storage.releases"]["error"].startswith("PermissionError")
    assert "hunter2" not in response.content.decode()


def test_by_default_a_process_stays_ready_while_redis_is_away(client, settings):
    # given a dead cache and broker, with the default required checks (labelling goes on)
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{_dead_port()}/0"
    settings.CACHES = {
        "default": {
            "BACKEND": "labeling.cache.FallbackRedisCache",
            "LOCATION": f"redis://127.0.0.1:{_dead_port()}/2",
        }
    }
    response, _ = _ready(client)
    # then the process is ready, and both failures are still reported
    assert (response.status_code, response.json()["status"]) == (200, "ok")
    assert response.json()["checks"]["cache"]["ok"] is False
    assert response.json()["checks"]["broker"]["ok"] is False


def test_probes_are_neither_redirected_to_https_nor_throttled_nor_csrf_checked(client, settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"anon": "1/minute", "user": "1/minute", "token": "1/minute"},
    }
    assert client.get("/accounts/login/").status_code == 301  # other paths are redirected
    for _ in range(5):
        assert client.get("/health/live").status_code == 200
        assert client.get("/health/ready").status_code == 200
    # other methods are refused, not a CSRF failure
    csrf_client = type(client)(enforce_csrf_checks=True)
    assert csrf_client.post("/health/live").status_code == 405
    assert client.head("/health/ready").status_code == 200


def test_errors_are_one_short_line_without_secrets():
    error = ValueError("cannot reach amqp://user:pw@host:5672// (token=abc)\ntraceback line")
    assert health.safe_error(error) == "ValueError: cannot reach <url> (token=<redacted>"
    assert len(health.safe_error(ValueError("x" * 500))) == health.ERROR_LENGTH
