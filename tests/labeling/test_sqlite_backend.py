"""The embedded default's SQLite backend: write transactions queue on a file lock.

Real processes on a real database file: one holds a write transaction while another writes;
the holder commits, rolls back, or is killed. Each child is a fresh interpreter with the
project's settings and ``DATABASE_URL`` pointing at the test's own file.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHILD = """
import os, sys, time, django
django.setup()
from django.db import connection, transaction
mode = sys.argv[1]
try:
    with transaction.atomic():
        connection.cursor().execute("INSERT INTO t (who) VALUES (%s)", [mode])
        if mode == "hold-fork":  # a child forked without exec outlives its parent
            child = os.fork()
            if child == 0:
                time.sleep(60)
                os._exit(0)
            print(child, flush=True)
        print("in", flush=True)
        if mode.startswith("hold"):
            sys.stdin.readline()  # the test says when to end
            if mode == "hold-fail":
                raise RuntimeError("rolled back")
except RuntimeError:
    pass
except Exception as exc:
    print(type(exc).__name__, exc, flush=True)
    raise SystemExit(3)
print("done", flush=True)
"""


@pytest.fixture
def database(tmp_path):
    path = tmp_path / "embedded.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (who TEXT)")
    return path


def child(database: Path, mode: str, timeout: int = 30) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="labeling.settings",
        DATABASE_URL=f"sqlite:///{database}",
        SQLITE_BUSY_TIMEOUT=str(timeout),
    )
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, mode],
        cwd=REPO,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def rows(database: Path) -> list[str]:
    with sqlite3.connect(database) as conn:
        return [who for (who,) in conn.execute("SELECT who FROM t ORDER BY rowid")]


def test_a_writer_waits_for_the_holder_and_gets_in_when_it_commits(database):
    holder = child(database, "hold")
    assert holder.stdout.readline().strip() == "in"
    writer = child(database, "write")
    with pytest.raises(subprocess.TimeoutExpired):
        writer.wait(timeout=2)  # queued behind the holder's transaction
    assert (database.parent / f"{database.name}.writers.lock").exists()
    holder.communicate("\n", timeout=30)
    out, _ = writer.communicate(timeout=30)
    assert holder.returncode == 0 and writer.returncode == 0, out
    assert rows(database) == ["hold", "write"]


def test_a_rolled_back_holder_lets_the_next_writer_in(database):
    holder = child(database, "hold-fail")
    assert holder.stdout.readline().strip() == "in"
    writer = child(database, "write")
    holder.communicate("\n", timeout=30)
    out, _ = writer.communicate(timeout=30)
    assert writer.returncode == 0, out
    assert rows(database) == ["write"]


def test_a_killed_holder_lets_the_next_writer_in(database):
    holder = child(database, "hold")
    assert holder.stdout.readline().strip() == "in"
    writer = child(database, "write")
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    out, _ = writer.communicate(timeout=30)
    assert writer.returncode == 0, out
    assert rows(database) == ["write"]  # the killed one's row never committed


def test_a_writer_that_waits_past_the_busy_timeout_is_told_the_database_is_locked(database):
    holder = child(database, "hold")
    assert holder.stdout.readline().strip() == "in"
    writer = child(database, "write", timeout=1)
    out, _ = writer.communicate(timeout=30)
    holder.communicate("\n", timeout=30)
    assert writer.returncode == 3
    assert "OperationalError database is locked" in out
    assert rows(database) == ["hold"]


def test_a_child_forked_by_the_holder_does_not_keep_the_lock_when_the_holder_dies(database):
    holder = child(database, "hold-fork")
    forked = int(holder.stdout.readline())
    try:
        assert holder.stdout.readline().strip() == "in"
        writer = child(database, "write", timeout=10)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
        out, _ = writer.communicate(timeout=30)  # well before the child's 60 s are up
        assert writer.returncode == 0, out
        assert rows(database) == ["write"]
    finally:
        os.kill(forked, signal.SIGKILL)
