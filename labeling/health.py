"""Readiness checks of a web process: database, cache, Celery broker and shared storages.

``GET /health/ready`` (``labeling.views.health``) runs :func:`readiness_checks` and answers 200
when every required check passed, 503 otherwise. Each check is quick by construction:

- ``database``: ``SELECT 1`` on the default connection;
- ``cache``: a ``PING`` to Redis when the cache is :class:`~labeling.cache.FallbackRedisCache`
  (the fallback to process memory does not count as Redis being up; at most 0.5 s), else a
  set, get and delete of a probe key;
- ``broker``: a connection to ``CELERY_BROKER_URL`` with a 1 s connect and socket timeout and no
  retry; ``memory://`` (tasks run in-process) passes without a connection;
- ``storage.releases``, ``storage.jobs``: ``exists()`` of a probe name in each storage that
  ``STORAGES`` configures (a local directory or an object store).

A failed check reports a short error, ``ExceptionClass: first line of its message`` with every
URL and password in it replaced, never a traceback. Which checks make the answer 503 is
``CERTLABEL_READY_REQUIRES`` (default: all but the cache and the broker).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import caches
from django.core.files.storage import storages
from django.db import connection

from labeling.cache import FallbackRedisCache

#: Every check, in the order they run and are listed.
CHECK_NAMES = ("database", "cache", "broker", "storage.releases", "storage.jobs")
#: The storages checked (those of ``STORAGES`` that several machines share).
STORAGE_ALIASES = ("releases", "jobs")
#: Seconds a broker connection may take to open and to answer.
BROKER_TIMEOUT = 1
#: The name whose existence is asked of each storage (it need not exist).
STORAGE_PROBE = "certlabel-health-probe"
#: The key the cache check writes, reads back and deletes (cache other than Redis).
CACHE_PROBE_KEY = "certlabel:health:probe"
#: Longest error text reported per check (characters).
ERROR_LENGTH = 200

_URL = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://\S+")
_PASSWORD = re.compile(r"(?i)(password|passwd|pwd|secret|token)(\s*[=:]\s*)\S+")


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check: its name, whether it passed, why not, and its duration."""

    name: str
    ok: bool
    error: str | None
    #: Wall-clock milliseconds the check took.
    ms: int


def safe_error(error: BaseException) -> str:
    """Return ``error`` as one short line that names no URL, password or token.

    The text is ``ExceptionClass: first line of the message`` with each ``scheme://...`` replaced
    by ``<url>`` and each ``password=...`` (or ``secret``, ``token``) value by ``<redacted>``,
    cut to :data:`ERROR_LENGTH` characters.
    """
    message = str(error).strip()
    first = message.splitlines()[0] if message else ""
    first = _PASSWORD.sub(r"\1\2<redacted>", _URL.sub("<url>", first))
    text = f"{type(error).__name__}: {first}" if first else type(error).__name__
    return text[:ERROR_LENGTH]


def check_database() -> None:
    """Run ``SELECT 1`` on the default database.

    Raises:
        django.db.Error: the database cannot be reached or refused the query.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def check_cache() -> None:
    """Ask Redis for a PING (:class:`FallbackRedisCache`) or round-trip a probe key.

    Raises:
        redis.exceptions.RedisError: Redis did not answer (or is in its back-off).
        RuntimeError: another backend did not give the probe value back.
    """
    cache = caches["default"]
    if isinstance(cache, FallbackRedisCache):
        cache.redis_check()
        return
    cache.set(CACHE_PROBE_KEY, "ok", timeout=10)
    value = cache.get(CACHE_PROBE_KEY)
    cache.delete(CACHE_PROBE_KEY)
    if value != "ok":
        raise RuntimeError("the cache did not keep a value")


def check_broker() -> None:
    """Open (and close) one connection to ``CELERY_BROKER_URL``; ``memory://`` passes at once.

    Raises:
        Exception: kombu's or the transport's error when the broker cannot be reached within
            :data:`BROKER_TIMEOUT` seconds.
    """
    url = str(getattr(settings, "CELERY_BROKER_URL", "") or "memory://")
    if url.startswith("memory://"):
        return
    from kombu import Connection

    options = {
        **getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}),
        "socket_connect_timeout": BROKER_TIMEOUT,
        "socket_timeout": BROKER_TIMEOUT,
        "max_retries": 0,
    }
    with Connection(url, connect_timeout=BROKER_TIMEOUT, transport_options=options) as broker:
        broker.ensure_connection(max_retries=0, timeout=BROKER_TIMEOUT)


def check_storage(alias: str) -> Callable[[], None]:
    """Return the check of storage ``alias``: ``exists()`` of a probe name.

    The check raises what the storage raises (``OSError``, an object store's client error).
    """

    def check() -> None:
        storages[alias].exists(STORAGE_PROBE)

    return check


def _run(name: str, check: Callable[[], None]) -> CheckResult:
    start = time.monotonic()
    error: str | None = None
    try:
        check()
    except Exception as exc:  # any failure is the check's answer
        error = safe_error(exc)
    ms = round((time.monotonic() - start) * 1000)
    return CheckResult(name=name, ok=error is None, error=error, ms=ms)


def readiness_checks() -> list[CheckResult]:
    """Run every check (each storage only when ``STORAGES`` configures it), in order."""
    checks: list[tuple[str, Callable[[], None]]] = [
        ("database", check_database),
        ("cache", check_cache),
        ("broker", check_broker),
    ]
    checks += [
        (f"storage.{alias}", check_storage(alias))
        for alias in STORAGE_ALIASES
        if alias in settings.STORAGES
    ]
    return [_run(name, check) for name, check in checks]


def required_checks() -> frozenset[str]:
    """Return the names of the checks whose failure makes the process not ready.

    ``CERTLABEL_READY_REQUIRES`` (a list of check names; by default every check but the cache
    and the broker, which labelling does not need).
    """
    return frozenset(settings.CERTLABEL_READY_REQUIRES)


def is_ready(results: list[CheckResult]) -> bool:
    """Tell whether every required check in ``results`` passed."""
    required = required_checks()
    return all(result.ok for result in results if result.name in required)
