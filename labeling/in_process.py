"""The embedded default's background thread: work that must not run inside a request.

Without a broker, Celery runs a task inside the call that sends it (``CELERY_TASK_ALWAYS_EAGER``).
For background work that would put a request behind a whole computation (a recomputation of the
project's statistics, a calibration run, a release build, a large import), on the request's
thread and, on SQLite, under the database's one write lock. So a web process of the embedded
default (``labeling.wsgi``, which ``runserver`` and gunicorn load) calls :func:`start` when
``CERTLABEL_IN_PROCESS_THREAD`` is on (the default when tasks run in-process): from then on the
background engine (``labeling.engine.send``) and the scheduler of derived results hand their
work to one daemon thread of the process (:func:`run_later`), which runs it in order of due
time, while the request returns after its own commit. The thread also runs the periodic work
registered with :func:`periodic_register` (the engine's recovery pass: no beat runs without a
broker). A process that never started the thread (a management command, the tests) runs the
work inline, so nothing it sends is left to a thread that dies with it.

What bounds the work is the caller's, not this module's: derived results coalesce in the
database (at most one waiting and one running per project and kind), and each job, run or build
is sent once. Work still waiting when the process exits is lost with it; its row is in the
database, and the recovery pass of the next process sends it again (on SQLite a lease is taken
over once its owner process is gone).

Each piece of work runs with its own database connections, closed when it ends.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import connections

logger = logging.getLogger(__name__)

Work = Callable[..., object]


class InProcessRunner:
    """One daemon thread running callables when they are due (started on first use).

    Entries are ``(due, sequence, name, work, args, period)``; ``period`` > 0 makes an entry
    run again that many seconds after it ends.
    """

    def __init__(self) -> None:
        """An idle runner (no thread until the first entry)."""
        self._entries: list[tuple[float, int, str, Work, tuple[Any, ...], float]] = []
        self._sequence = itertools.count()
        self._periodic: set[str] = set()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def submit(self, name: str, work: Work, *args: Any, delay: float = 0.0) -> None:
        """Run ``work(*args)`` on the thread once ``delay`` seconds have passed.

        Args:
            name: what the log calls the work when it fails.
            work: the callable; an exception it raises is logged, never propagated.
            *args: its arguments.
            delay: seconds to wait first (>= 0; a negative value counts as 0).
        """
        self._push(name, work, args, max(0.0, delay), 0.0)

    def every(self, name: str, period: float, work: Work, *args: Any) -> None:
        """Run ``work(*args)`` every ``period`` seconds (after the first period), once per name.

        Args:
            name: the periodic work's name: a second registration under it is ignored.
            period: seconds between the end of one run and the start of the next (> 0).
            work: the callable; an exception it raises is logged and the next run still comes.
            *args: its arguments.

        Raises:
            ValueError: ``period`` is not positive.
        """
        if not period > 0:
            raise ValueError(f"period must be positive, got {period}")
        with self._wake:
            if name in self._periodic:
                return
            self._periodic.add(name)
        self._push(name, work, args, period, period)

    def pending(self) -> int:
        """How many entries wait (periodic ones included)."""
        with self._wake:
            return len(self._entries)

    def _push(
        self, name: str, work: Work, args: tuple[Any, ...], delay: float, period: float
    ) -> None:
        with self._wake:
            due = time.monotonic() + delay
            heapq.heappush(self._entries, (due, next(self._sequence), name, work, args, period))
            self._wake.notify()
        self.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread once its current work ends; drop what waits (tests end with it)."""
        with self._wake:
            self._stopped = True
            self._entries.clear()
            self._wake.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _next(self) -> tuple[str, Work, tuple[Any, ...], float] | None:
        with self._wake:
            while True:
                if self._stopped:
                    return None
                now = time.monotonic()
                if self._entries and self._entries[0][0] <= now:
                    _, _, name, work, args, period = heapq.heappop(self._entries)
                    return name, work, args, period
                timeout = self._entries[0][0] - now if self._entries else None
                self._wake.wait(timeout)

    def _loop(self) -> None:
        while (entry := self._next()) is not None:
            name, work, args, period = entry
            try:
                work(*args)
            except Exception:  # the thread outlives any one piece of work
                logger.exception("in_process.failed", extra={"work": name})
            finally:
                connections.close_all()
            if period:
                self._push(name, work, args, period, period)

    def started(self) -> bool:
        """Whether the thread runs (False after a fork: threads do not survive one)."""
        with self._wake:
            return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the thread now (it also starts with the first entry); not after :meth:`stop`."""
        with self._wake:
            if self._stopped:
                return
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="certlabel-in-process", daemon=True
                )
                self._thread.start()


_runner = InProcessRunner()
_periodic: dict[str, tuple[float, Work]] = {}


def periodic_register(name: str, period: float, work: Work) -> None:
    """Register ``work()`` to run every ``period`` seconds on the thread, once it is started.

    Args:
        name: a stable name; registering it again replaces the entry (before :func:`start`).
        period: seconds between two runs (0 or less: never run).
        work: the callable (no arguments).
    """
    _periodic[name] = (period, work)


def start() -> None:
    """Start this process's background thread and its periodic work (idempotent)."""
    _runner.start()
    for name, (period, work) in _periodic.items():
        if period > 0:  # a period of 0 (or less) turns that work off
            _runner.every(name, period, work)


def running() -> bool:
    """Whether this process's background thread runs (:func:`start` was called here)."""
    return _runner.started()


def run_later(name: str, work: Work, *args: Any, delay: float = 0.0) -> None:
    """Run ``work(*args)`` on this process's background thread (:meth:`InProcessRunner.submit`)."""
    _runner.submit(name, work, *args, delay=delay)
