"""A write repeated in the background while a block of long work runs (heartbeats, progress).

Long work (a release build, a calibration run, a background job) shows it is alive by writing a
row every few seconds, even during one long step. :class:`PeriodicWrite` runs that write from a
daemon thread with its own database connection (closed when the thread ends), so the write is
committed and visible while the work's own transaction is still open. Used by
``labeling.services.jobs`` and ``certification.services.liveness``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import DatabaseError, connection

logger = logging.getLogger(__name__)


class PeriodicWrite:
    """Call ``write`` every ``interval`` seconds from a daemon thread while a block runs.

    ``write`` returning ``False`` stops the beating (the row is no longer the work's); any other
    result goes on. A ``DatabaseError`` is logged and retried at the next beat: a heartbeat never
    fails the work. Use as a context manager::

        with PeriodicWrite(lambda: row_touch(pk), interval=15.0, name="build-7"):
            work()
    """

    def __init__(self, write: Callable[[], bool | None], *, interval: float, name: str) -> None:
        """Prepare the thread; ``interval`` in seconds, ``name`` for logs and the thread."""
        self.write, self.interval, self.name = write, interval, name
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"beat-{name}", daemon=True)

    def __enter__(self) -> PeriodicWrite:
        """Start beating."""
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop beating and wait (at most an interval, at least 5 s) for the thread to end."""
        self._stop.set()
        self._thread.join(timeout=max(5.0, self.interval))

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                try:
                    if self.write() is False:
                        return
                except DatabaseError:
                    logger.warning("heartbeat.failed", extra={"name": self.name})
        finally:
            connection.close()  # this thread's own connection
