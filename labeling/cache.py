"""A Redis cache that keeps answering from process memory while Redis is away.

:class:`FallbackRedisCache` is Django's ``RedisCache`` except that a failed Redis call is served
by a ``LocMemCache`` of this process instead of raising (the DRF throttles then count per
process). Calls never retry and time out after ``socket_connect_timeout`` / ``socket_timeout``;
after a failure the process uses the local cache for ``FALLBACK_RETRY_SECONDS`` before one call
tries Redis again. An outage is logged once (``cache.redis_unavailable``, at most every
``FALLBACK_WARNING_SECONDS``) and its end as ``cache.redis_restored``. The outage state is shared
by the process's threads, keyed by the server address.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

#: Seconds to connect to Redis and to wait for an answer, unless the options say otherwise.
DEFAULT_SOCKET_TIMEOUT = 0.5
#: Seconds every call goes to the local cache after a failure before Redis is tried again.
DEFAULT_RETRY_SECONDS = 5.0
#: At most one ``cache.redis_unavailable`` warning per this many seconds.
DEFAULT_WARNING_SECONDS = 30.0
#: Entries the per-process fallback keeps before it culls (LocMemCache's MAX_ENTRIES).
FALLBACK_MAX_ENTRIES = 10_000

#: The cache methods that talk to Redis; every other method of ``BaseCache`` (``decr``,
#: ``get_or_set``, ``incr_version``, the ``a*`` async variants...) is built on these.
REDIS_METHODS = (
    "add",
    "get",
    "set",
    "touch",
    "delete",
    "get_many",
    "has_key",
    "incr",
    "set_many",
    "delete_many",
    "clear",
)


def redacted_location(location: str | list[str]) -> str:
    """Return the server address(es) for a log line: scheme, host, port and db, no credentials."""
    servers = location if isinstance(location, list) else [location]
    shown = []
    for server in servers:
        parts = urlsplit(server)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        shown.append(f"{parts.scheme}://{host}{port}{parts.path}")
    return ",".join(shown)


def error_text(error: BaseException) -> str:
    """Return ``error`` as ``ClassName: first line`` (at most 200 characters), for logs."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    text = f"{type(error).__name__}: {first}" if first else type(error).__name__
    return text[:200]


@dataclass
class RedisOutage:
    """Whether one Redis server is usable by this process, and since when it is not.

    Times are ``time.monotonic()`` seconds. Every method is thread-safe.
    """

    server: str
    retry_seconds: float
    warning_seconds: float
    down: bool = False
    since: float = 0.0
    retry_at: float = 0.0
    last_warning: float | None = None
    local_calls: int = 0
    last_error: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def may_try(self) -> bool:
        """Tell whether a call should go to Redis: it is up, or its back-off is over.

        When the back-off is over, this call is the one that tries (the next try is pushed a
        back-off further), so concurrent calls do not all wait on a Redis that is still away.
        """
        if not self.down:
            return True
        with self.lock:
            now = time.monotonic()
            if not self.down:
                return True
            if now >= self.retry_at:
                self.retry_at = now + self.retry_seconds
                return True
            self.local_calls += 1
            return False

    def failed(self, error: BaseException) -> None:
        """Record that Redis failed a call: start (or extend) the back-off, warn once."""
        with self.lock:
            now = time.monotonic()
            self.retry_at = now + self.retry_seconds
            self.local_calls += 1
            self.last_error = text = error_text(error)
            if self.down:
                return
            self.down, self.since = True, now
            if self.last_warning is not None and now - self.last_warning < self.warning_seconds:
                return
            self.last_warning = now
        logger.warning(
            "cache.redis_unavailable",
            extra={
                "server": self.server,
                "error": text,
                "fallback": "process memory",
                "retry_seconds": self.retry_seconds,
            },
        )

    def succeeded(self) -> None:
        """Record that Redis answered a call: the outage, if any, is over."""
        if not self.down:
            return
        with self.lock:
            if not self.down:
                return
            seconds = time.monotonic() - self.since
            calls, self.local_calls = self.local_calls, 0
            self.down = False
        logger.info(
            "cache.redis_restored",
            extra={
                "server": self.server,
                "outage_seconds": round(seconds, 1),
                "local_calls": calls,
            },
        )


_OUTAGES: dict[str, RedisOutage] = {}
_OUTAGES_LOCK = threading.Lock()


def outage_for(server: str, *, retry_seconds: float, warning_seconds: float) -> RedisOutage:
    """Return the process-wide :class:`RedisOutage` of ``server`` (created on first use)."""
    with _OUTAGES_LOCK:
        outage = _OUTAGES.get(server)
        if outage is None:
            outage = RedisOutage(
                server=redacted_location(server),
                retry_seconds=retry_seconds,
                warning_seconds=warning_seconds,
            )
            _OUTAGES[server] = outage
        return outage


class FallbackRedisCache(RedisCache):
    """Django's Redis cache, served from a per-process ``LocMemCache`` while Redis fails.

    ``OPTIONS`` are those of ``RedisCache`` (passed to the redis-py connection pool), with the
    socket timeouts defaulting to 0.5 s, plus two of this class, taken out before the pool sees
    them: ``FALLBACK_RETRY_SECONDS`` (5) and ``FALLBACK_WARNING_SECONDS`` (30).
    """

    def __init__(self, server: str | list[str], params: dict[str, Any]) -> None:
        options = dict(params.get("OPTIONS") or {})
        retry_seconds = float(options.pop("FALLBACK_RETRY_SECONDS", DEFAULT_RETRY_SECONDS))
        warning_seconds = float(options.pop("FALLBACK_WARNING_SECONDS", DEFAULT_WARNING_SECONDS))
        options.setdefault("socket_connect_timeout", DEFAULT_SOCKET_TIMEOUT)
        options.setdefault("socket_timeout", DEFAULT_SOCKET_TIMEOUT)
        super().__init__(server, {**params, "OPTIONS": options})
        key = server if isinstance(server, str) else ",".join(server)
        self.outage = outage_for(key, retry_seconds=retry_seconds, warning_seconds=warning_seconds)
        fallback_params: dict[str, Any] = {
            name: params[name]
            for name in ("TIMEOUT", "KEY_PREFIX", "VERSION", "KEY_FUNCTION")
            if name in params
        }
        fallback_params["OPTIONS"] = {"MAX_ENTRIES": FALLBACK_MAX_ENTRIES}
        # LocMemCache instances of one name share their storage: one fallback per process.
        self.fallback = LocMemCache(f"certlabel-redis-fallback:{key}", fallback_params)

    def _call(self, name: str, redis_method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run cache method ``name`` on Redis, or on the local fallback while Redis fails."""
        if self.outage.may_try():
            try:
                result = redis_method(self, *args, **kwargs)
            except RedisError as error:
                self.outage.failed(error)
            else:
                self.outage.succeeded()
                return result
        return getattr(self.fallback, name)(*args, **kwargs)

    def redis_check(self) -> None:
        """Ask Redis itself for a PING (the readiness check), never the fallback.

        During the back-off after a failure, Redis is not asked: the outage's last error is
        raised at once. A PING that succeeds ends the outage.

        Raises:
            RedisError: Redis did not answer (within the socket timeouts) or is in back-off.
        """
        if not self.outage.may_try():
            raise RedisError(f"unavailable, cache served per process ({self.outage.last_error})")
        try:
            self._cache.get_client(None, write=True).ping()
        except RedisError as error:
            self.outage.failed(error)
            raise
        self.outage.succeeded()


def _with_fallback(name: str) -> Callable[..., Any]:
    redis_method = getattr(RedisCache, name)

    def method(self: FallbackRedisCache, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, redis_method, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``RedisCache.{name}``, served by the local fallback while Redis fails."
    return method


for _name in REDIS_METHODS:
    setattr(FallbackRedisCache, _name, _with_fallback(_name))
