"""The Celery tasks that services send, looked up by name: how a service reaches a task.

A task is a thin wrapper around a service, so a tasks module imports the services; a service
that sends a task therefore cannot import the tasks module back without an import cycle
(``tests/test_architecture.py`` forbids every cycle). Instead each tasks module registers the
tasks that services send under a name with :func:`task_register` when it is imported, and each
app's ``ready`` imports its tasks module, so every process that has set Django up (a web
process, a worker, a management command, the tests) holds them all before any service sends.
A service sends with ``dispatch.task(NAME).delay(...)``, by the name its own module defines.
This module imports nothing of the project.
"""

from __future__ import annotations

from typing import Any

_tasks: dict[str, Any] = {}


def task_register(name: str, task: Any) -> None:
    """Register (or replace) the task sent under ``name``."""
    _tasks[name] = task


def task(name: str) -> Any:
    """Return the task registered as ``name`` (a Celery task: ``delay``, ``apply_async``, ...).

    Raises:
        LookupError: no task is registered under ``name`` (its tasks module was not imported:
            Django is not set up).
    """
    try:
        return _tasks[name]
    except KeyError:
        raise LookupError(
            f"no task registered as {name!r}: its tasks module registers it when imported "
            "(the app's ready() imports it once Django is set up)"
        ) from None
