"""Staleness marks of derived results, and the one after-commit hand-off to their scheduler.

A write that changes an input of a derived result calls :func:`derived_mark` inside its
transaction: one :class:`~labeling.models.DerivedChange` row per kind is inserted, so the mark
commits or rolls back with the write. After the commit, the kinds marked by the transaction are
handed, once each and a project's kinds together, to the scheduler registered by the app that
computes them (``certification`` registers it in its ``AppConfig.ready``; ``labeling`` never
imports ``certification``). All the marks and after-commit events of one transaction share one
``on_commit`` callback (:class:`CommitBatch`), so a request that submits a vote and resolves an
item hands each kind over once.

A write that changes some items (their resolution, their status) or some evaluators' labels
may affect only some kinds: :func:`derived_mark_touched` marks a kind only when the test the
computing app registered for it (:func:`derived_inputs_register`) says the kind reads one of
them (a calibration run reads the items of its spec's partitions, an audit the items its
evaluator labelled). A kind without a registered test is marked by every such write.

The scheduler must not raise: a broker that is down is logged, the mark stays in the database
and the reconciler picks it up. Even so, the batch runs each hand-off separately and logs a
failure, so a committed write is never turned into an error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from django.db import connection, transaction

from labeling.models import DerivedChange, DerivedKind
from labeling.rows import insert

logger = logging.getLogger(__name__)

ALL_KINDS: tuple[str, ...] = tuple(DerivedKind.values)

# Called with a project id and the kinds marked in it (sorted, each once).
Scheduler = Callable[[int, tuple[str, ...]], None]
_schedulers: dict[str, Scheduler] = {}
# Called with a project id, the changed item ids and the changed evaluator ids (sorted, each
# once; either may be empty): whether the kind's result reads any of them.
InputsTest = Callable[[int, tuple[int, ...], tuple[int, ...]], bool]
_inputs_tests: dict[str, InputsTest] = {}


def derived_scheduler_register(name: str, scheduler: Scheduler) -> None:
    """Register (or replace, by ``name``) a function called with (project id, kinds) after commit.

    Args:
        name: a stable name; registering the same name again replaces the function.
        scheduler: called once per project marked by a committed transaction, with the kinds
            marked in it (sorted, each once).
    """
    _schedulers[name] = scheduler


def derived_inputs_register(kind: str, reads: InputsTest) -> None:
    """Register (or replace) the test of whether changed items or evaluators are a kind's input.

    Args:
        kind: a :class:`~labeling.models.DerivedKind` value.
        reads: called inside the writing transaction with (project id, item ids, evaluator ids);
            returns whether the kind's result reads any of them. It runs on the label write
            path: it must cost in the size of the change, not of the project.

    Raises:
        ValueError: an unknown kind.
    """
    if kind not in ALL_KINDS:
        raise ValueError(f"unknown derived kind {kind!r}")
    _inputs_tests[kind] = reads


def derived_schedulers() -> list[str]:
    """Return the names of the registered schedulers, in registration order."""
    return list(_schedulers)


class CommitBatch:
    """The after-commit callback of one atomic block: its events, then its marked kinds.

    A batch opened inside an atomic block nested in one that has a batch already is that
    batch's child: when the outer batch runs (it was registered first, so it runs first) it
    hands over its children's kinds with its own, once each, and the children then run only
    their events. A child whose savepoint rolled back is dropped by Django with its events; its
    kinds may still be handed over (an extra recomputation of unchanged inputs is harmless).
    """

    def __init__(self, parent: CommitBatch | None = None) -> None:
        """Start an empty batch, the child of ``parent`` if given."""
        self.keys: set[tuple[int, str]] = set()
        self.events: list[Callable[[], None]] = []
        self.children: list[CommitBatch] = []
        self.handed_over = False
        if parent is not None:
            parent.children.append(self)

    def _take_keys(self) -> set[tuple[int, str]]:
        keys = set(self.keys)
        self.handed_over = True
        for child in self.children:
            keys |= child._take_keys()
        return keys

    def __call__(self) -> None:
        """Run the events, then hand each marked project's kinds to every scheduler once."""
        for event in self.events:
            try:
                event()
            except Exception:  # a committed write is never turned into an error
                logger.exception("derived.event_failed")
        if self.handed_over:
            return
        marked: dict[int, list[str]] = {}
        for project_id, kind in sorted(self._take_keys()):
            marked.setdefault(project_id, []).append(kind)
        for project_id, kinds in marked.items():
            for name, scheduler in list(_schedulers.items()):
                try:
                    scheduler(project_id, tuple(kinds))
                except Exception:
                    logger.exception(
                        "derived.schedule_failed",
                        extra={"project_id": project_id, "kinds": kinds, "scheduler": name},
                    )


def commit_batch() -> CommitBatch:
    """Return the current atomic block's after-commit batch, registering it on first use.

    Outside a transaction (autocommit) a fresh batch is returned; the caller runs it.
    """
    if not connection.in_atomic_block:
        return CommitBatch()
    here = set(connection.savepoint_ids)
    outer: CommitBatch | None = None
    for entry in connection.run_on_commit:  # (savepoint ids, callback, robust)
        sids, callback = entry[0], entry[1]
        if isinstance(callback, CommitBatch):
            if sids == here:
                return callback
            if sids <= here:
                outer = callback
    batch = CommitBatch(parent=outer)
    transaction.on_commit(batch)
    return batch


def derived_mark(*, project_id: int, kinds: Iterable[str] = ALL_KINDS) -> None:
    """Mark derived results of a project stale, in the current transaction.

    Inserts one change row per kind (rolled back with the transaction) and, after the commit,
    hands each kind to the registered schedulers once per transaction.

    ``kinds`` defaults to every :class:`~labeling.models.DerivedKind`.

    Raises:
        ValueError: an unknown kind.
    """
    wanted = sorted(set(kinds))
    unknown = [kind for kind in wanted if kind not in ALL_KINDS]
    if unknown:
        raise ValueError(f"unknown derived kinds {unknown}")
    if not wanted:
        return
    # Every submit marks: one plain statement (labeling/rows.py).
    insert([DerivedChange(project_id=project_id, kind=kind) for kind in wanted])
    atomic = connection.in_atomic_block
    batch = commit_batch()
    batch.keys.update((project_id, kind) for kind in wanted)
    if not atomic:
        batch()


def after_commit(event: Callable[[], None]) -> None:
    """Run ``event`` after the current transaction commits, in its batch, before the schedulers.

    A failure of ``event`` is logged, not raised.
    """
    if not connection.in_atomic_block:
        batch = CommitBatch()
        batch.events.append(event)
        batch()
        return
    commit_batch().events.append(event)


def derived_mark_touched(
    *,
    project_id: int,
    kinds: Iterable[str],
    item_ids: Sequence[int] = (),
    evaluator_ids: Sequence[int] = (),
) -> list[str]:
    """Mark stale, in the current transaction, those of ``kinds`` that read a changed input.

    For each kind, the test registered by :func:`derived_inputs_register` says whether its
    result reads one of the changed items or evaluators; a kind without a test is marked.
    Nothing is marked when no item and no evaluator changed.

    Returns:
        The kinds marked (sorted).

    Raises:
        ValueError: an unknown kind.
    """
    items = tuple(sorted(set(item_ids)))
    evaluators = tuple(sorted(set(evaluator_ids)))
    if not items and not evaluators:
        return []
    wanted = []
    for kind in sorted(set(kinds)):
        test = _inputs_tests.get(kind)
        if test is None or test(project_id, items, evaluators):
            wanted.append(kind)
    derived_mark(project_id=project_id, kinds=wanted)
    return wanted
