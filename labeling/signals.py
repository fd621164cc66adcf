"""The one domain event of the labelling flow: items were resolved.

``items_resolved`` is sent after the transaction that resolved the items commits (consensus,
adjudication or unresolved). Keyword arguments: ``project_id`` (int), ``item_ids`` (tuple of
int, sorted) and ``statuses`` (tuple of resolution statuses, aligned with ``item_ids``).
Receivers must be idempotent: they may see an item twice (a correction re-resolves it).

The derived results do not depend on the event: :func:`announce_resolutions` also marks, in
the resolving transaction, the derived results whose inputs a resolution changes
(:func:`labeling.derived.derived_mark_touched`), and their recomputation is scheduled from that
mark: the agreement statistics and the per-person reliability (it compares the votes with the
resolutions) always; the calibration runs only when a resolved item lies in a partition some
calibration spec reads; the evaluator audits only when a resolved item was labelled by an
audited evaluator.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.dispatch import Signal

from labeling.derived import after_commit, derived_mark_touched
from labeling.models import DerivedKind

items_resolved = Signal()

#: The derived results a resolution may change: calibration and audit only when their
#: registered inputs tests say they read a resolved item; the per-person reliability (it compares
#: the votes with the resolutions). Not the agreement: it reads the votes alone, and the vote's
#: own write marks it.
RESOLUTION_KINDS: tuple[str, ...] = (
    DerivedKind.CALIBRATION,
    DerivedKind.AUDIT,
    DerivedKind.RELIABILITY,
)


def announce_resolutions(*, project_id: int, resolved: Iterable[tuple[int, str]]) -> None:
    """Mark the derived results that read the items stale; send ``items_resolved`` after commit.

    The kinds of :data:`RESOLUTION_KINDS` whose registered inputs test says they read one of
    the resolved items are marked (:func:`labeling.derived.derived_mark_touched`).

    Args:
        project_id: the project of every item.
        resolved: (item id, resolution status) pairs; nothing is marked or sent when empty.
    """
    pairs = sorted(resolved)
    if not pairs:
        return

    def send() -> None:
        items_resolved.send(
            sender=None,
            project_id=project_id,
            item_ids=tuple(item_id for item_id, _ in pairs),
            statuses=tuple(status for _, status in pairs),
        )

    derived_mark_touched(
        project_id=project_id, kinds=RESOLUTION_KINDS, item_ids=[item_id for item_id, _ in pairs]
    )
    after_commit(send)
