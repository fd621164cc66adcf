"""The Redis cache keeps answering from process memory while Redis is away (labeling/cache.py).

Two parts: the backend alone against a port where nothing listens (and one that accepts
connections but never answers), and API requests through Django's test client against a
real ``redis-server`` started on a free port, which is killed (SIGKILL) and started again.
The second part skips when ``redis-server`` is not on PATH, and fails instead when
``CERTLABEL_REQUIRE_SERVICES=1``.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from labeling.cache import FallbackRedisCache

#: Longest a cache call or a request may take while Redis is away (seconds).
LIMIT = 1.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cache(location: str, **options: Any) -> FallbackRedisCache:
    return FallbackRedisCache(location, {"OPTIONS": options})


def _timed(call: Callable[[], Any]) -> tuple[Any, float]:
    start = time.monotonic()
    result = call()
    return result, time.monotonic() - start


def _warnings(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "labeling.cache" and event in r.getMessage()]


# ---------------------------------------------------------------------------------------------
# The backend alone
# ---------------------------------------------------------------------------------------------


def test_a_redis_that_refuses_is_replaced_by_process_memory(caplog):
    # given a cache on a port where nothing listens
    caplog.set_level(logging.INFO, logger="labeling.cache")
    cache = _cache(f"redis://:s3cret@127.0.0.1:{_free_port()}/0")
    # when every kind of call is made
    calls: list[tuple[str, Callable[[], Any]]] = [
        ("set", lambda: cache.set("a", "value", 60)),
        ("get", lambda: cache.get("a")),
        ("add", lambda: cache.add("b", 1, 60)),
        ("incr", lambda: cache.incr("b")),
        ("decr", lambda: cache.decr("b", 5)),
        ("set_many", lambda: cache.set_many({"c": [1, 2], "d": "x"}, 60)),
        ("get_many", lambda: cache.get_many(["a", "c", "d", "missing"])),
        ("has_key", lambda: cache.has_key("d")),
        ("touch", lambda: cache.touch("d", 120)),
        ("get_or_set", lambda: cache.get_or_set("e", "made", 60)),
        ("delete", lambda: cache.delete("d")),
        ("delete_many", lambda: cache.delete_many(["c"])),
        ("get after delete", lambda: cache.get("c", "gone")),
    ]
    results = {}
    for name, call in calls:
        results[name], seconds = _timed(call)
        # then each answers within the limit
        assert seconds < LIMIT, (name, seconds)
    # and from the local fallback, as a cache does
    assert results["get"] == "value"
    assert (results["add"], results["incr"], results["decr"]) == (True, 2, -3)
    assert results["get_many"] == {"a": "value", "c": [1, 2], "d": "x"}
    assert (results["has_key"], results["touch"], results["get_or_set"]) == (True, True, "made")
    assert (results["delete"], results["get after delete"]) == (True, "gone")
    # and the outage was logged once, without the password
    warned = _warnings(caplog, "cache.redis_unavailable")
    assert len(warned) == 1
    assert warned[0].levelno == logging.WARNING
    assert "s3cret" not in str(vars(warned[0]))
    assert warned[0].getMessage() == "cache.redis_unavailable"
    assert warned[0].error.startswith("ConnectionError")
    # and clear empties the fallback
    _, seconds = _timed(cache.clear)
    assert (seconds < LIMIT, cache.get("a")) == (True, None)


def test_retries_after_the_back_off_log_no_second_warning(caplog):
    # given a cache whose back-off is short, on a port where nothing listens
    caplog.set_level(logging.INFO, logger="labeling.cache")
    cache = _cache(f"redis://127.0.0.1:{_free_port()}/0", FALLBACK_RETRY_SECONDS=0.05)
    cache.set("n", 1)
    # when calls go on past several back-offs (each after it retries Redis, and fails)
    for _ in range(5):
        time.sleep(0.06)
        assert cache.incr("n") > 1
    # then one warning for the whole outage
    assert len(_warnings(caplog, "cache.redis_unavailable")) == 1
    assert cache.get("n") == 6


def test_a_redis_that_never_answers_costs_one_socket_timeout_per_back_off():
    # given a port that accepts connections but never answers (a hung Redis)
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(16)
        port = hung.getsockname()[1]
        cache = _cache(f"redis://127.0.0.1:{port}/0")
        # when the first call meets it
        _, first = _timed(lambda: cache.set("k", "v"))
        # then it gives up after the socket timeout (0.5 s), within the limit
        assert 0.3 < first < LIMIT
        # and the calls during the back-off do not try Redis at all
        for _ in range(20):
            value, seconds = _timed(lambda: cache.get("k"))
            assert (value, seconds < 0.05) == ("v", True)


def test_threads_share_the_outage():
    # given two cache objects of one server (Django makes one per thread)
    location = f"redis://127.0.0.1:{_free_port()}/0"
    first, second = _cache(location), _cache(location)
    # when the first meets the outage
    first.set("shared", 7)
    # then the second knows of it (back-off) and sees the same process-wide fallback
    assert second.outage is first.outage and first.outage.down
    assert second.get("shared") == 7


# ---------------------------------------------------------------------------------------------
# A real Redis, killed under API requests
# ---------------------------------------------------------------------------------------------


def _start_redis(port: int, directory: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1"]
        + ["--save", "", "--appendonly", "no", "--dir", str(directory)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if redis.Redis(port=port, socket_connect_timeout=0.2).ping():
                return process
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("the private redis-server did not start")


@pytest.fixture
def redis_port(tmp_path: Path) -> Iterator[tuple[int, Callable[[], None], Callable[[], None]]]:
    """A private Redis on a free port: ``(port, kill, start)``; stopped after the test."""
    if shutil.which("redis-server") is None:
        reason = "needs redis-server on PATH to start a private Redis"
        if os.environ.get("CERTLABEL_REQUIRE_SERVICES") == "1":
            pytest.fail(f"CERTLABEL_REQUIRE_SERVICES=1 but {reason}")
        pytest.skip(reason)
    port = _free_port()
    processes = [_start_redis(port, tmp_path)]

    def kill() -> None:
        processes[-1].send_signal(signal.SIGKILL)
        processes[-1].wait(timeout=10)

    def start() -> None:
        processes.append(_start_redis(port, tmp_path))

    yield port, kill, start
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


@pytest.mark.django_db
def test_api_requests_answer_while_redis_is_killed_and_use_it_again(
    settings, redis_port, api, caplog
):
    port, kill, start = redis_port
    caplog.set_level(logging.INFO, logger="labeling.cache")
    settings.CACHES = {
        "default": {
            "BACKEND": "labeling.cache.FallbackRedisCache",
            "LOCATION": f"redis://127.0.0.1:{port}/0",
            "OPTIONS": {"FALLBACK_RETRY_SECONDS": 0.5},
        }
    }
    from django.core.cache import cache

    server = redis.Redis(port=port)
    annotator = api("annotator")

    def requests(n: int) -> list[tuple[int, float]]:
        answered = []
        for _ in range(n):
            response, seconds = _timed(lambda: annotator.get("/api/projects/"))
            answered.append((response.status_code, seconds))
        return answered

    # given Redis running: the project list answers, and the throttle counts in Redis
    assert {status for status, _ in requests(3)} == {200}
    assert server.keys("*throttle_user_*")
    # when Redis is killed
    kill()
    during = requests(20)
    # then every request still answers as usual, each within the limit
    assert {status for status, _ in during} == {200}
    slowest = max(seconds for _, seconds in during)
    assert slowest < LIMIT, during
    assert len(_warnings(caplog, "cache.redis_unavailable")) == 1
    # when Redis is back on the same port (after the back-off)
    start()
    time.sleep(0.6)
    assert {status for status, _ in requests(3)} == {200}
    # then the cache uses it again: the throttle counts there, and a value set is in Redis
    assert redis.Redis(port=port).keys("*throttle_user_*")
    cache.set("after-outage", 42)
    assert redis.Redis(port=port).get(cache.make_key("after-outage")) == b"42"
    assert len(_warnings(caplog, "cache.redis_restored")) == 1
