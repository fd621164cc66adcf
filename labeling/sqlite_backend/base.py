"""Django's SQLite backend, with write transactions queued on a file lock.

SQLite lets one writer in at a time; the others wait in its busy handler, which sleeps and
retries with growing pauses (1 ms up to 100 ms). Under steady writes (annotators submitting
from several web processes) a waiter that sleeps long keeps missing the moments the lock is
free, so a few requests wait many times longer than the rest. Here a write transaction
(``BEGIN IMMEDIATE``, which every ``transaction.atomic`` block opens on the embedded default)
first takes an exclusive ``flock`` on ``<database>.writers.lock``, polled every
``POLL_SECONDS``, so the waiters of every process and thread get in within a millisecond of
the lock being free. The lock is let go when the transaction commits or rolls back, and by
the kernel when the process dies. A waiter that does not get it within the busy timeout
(``OPTIONS["timeout"]``) gets ``OperationalError: database is locked``, as from SQLite.

The lock file sits beside the database file the connection opened (its absolute path is
taken when connecting, as SQLite resolves a relative name then). A process forked while it
holds the lock (``os.fork`` without ``exec``) closes its copy of the lock file in the child,
so the lock still ends with its holder and the child never releases the parent's lock.

An in-memory database has no file and takes no lock.
"""

from __future__ import annotations

import fcntl
import os
import time
import weakref
from typing import Any

from django.db import OperationalError
from django.db.backends.sqlite3 import base

#: Seconds between two attempts to take the writers' lock.
POLL_SECONDS = 0.0005
# Django's SQLite wrapper; typed Any because the type stubs leave out the private transaction
# methods overridden here.
_SQLiteWrapper: Any = base.DatabaseWrapper


# Every wrapper of this process, so that a forked child can let go of its copies.
_WRAPPERS: weakref.WeakSet[DatabaseWrapper] = weakref.WeakSet()


def _forget_in_child() -> None:
    """In a forked child: close the inherited lock files, hold nothing (``os.register_at_fork``)."""
    for wrapper in list(_WRAPPERS):
        if wrapper._writers_fd is not None:
            os.close(wrapper._writers_fd)  # the parent's lock stays the parent's
        wrapper._writers_fd = None
        wrapper._writers_held = False


os.register_at_fork(after_in_child=_forget_in_child)


class DatabaseWrapper(_SQLiteWrapper):
    """SQLite whose write transactions queue on ``<database>.writers.lock`` (module docstring)."""

    _writers_fd: int | None = None
    _writers_held = False
    _writers_path: str | None = None

    def get_new_connection(self, conn_params: Any) -> Any:
        """Open the database and note the writers' lock file beside it.

        None (no lock) for an in-memory database, and unless write transactions begin
        ``IMMEDIATE`` (only then does every atomic block take SQLite's write lock at once).
        """
        conn = super().get_new_connection(conn_params)
        unlocked = self.is_in_memory_db() or self.transaction_mode != "IMMEDIATE"
        name = os.path.abspath(self.settings_dict["NAME"])
        self._writers_path = None if unlocked else f"{name}.writers.lock"
        _WRAPPERS.add(self)
        return conn

    def _writers_acquire(self) -> None:
        path = self._writers_path
        if path is None or self._writers_held:
            return
        if self._writers_fd is None:
            self._writers_fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        deadline = time.monotonic() + float(self.settings_dict["OPTIONS"].get("timeout", 5))
        while True:
            try:
                fcntl.flock(self._writers_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise OperationalError("database is locked") from None
                time.sleep(POLL_SECONDS)
                continue
            self._writers_held = True
            return

    def _writers_release(self) -> None:
        if self._writers_held and self._writers_fd is not None:
            fcntl.flock(self._writers_fd, fcntl.LOCK_UN)
        self._writers_held = False

    def _start_transaction_under_autocommit(self) -> None:
        self._writers_acquire()
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._writers_release()
            raise

    def _commit(self) -> Any:
        try:
            return super()._commit()
        finally:
            self._writers_release()

    def _rollback(self) -> Any:
        try:
            return super()._rollback()
        finally:
            self._writers_release()

    def _close(self) -> Any:
        try:
            return super()._close()
        finally:
            self._writers_release()
            if self._writers_fd is not None:
                os.close(self._writers_fd)
                self._writers_fd = None
