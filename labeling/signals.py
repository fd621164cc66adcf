"""The one domain event of the labelling flow: items were resolved.

``items_resolved`` is sent after the transaction that resolved the items commits (consensus,
adjudication or unresolved). Keyword arguments: ``project_id`` (int), ``item_ids`` (tuple of
int, sorted) and ``statuses`` (tuple of resolution statuses, aligned with ``item_ids``).
Receivers must be idempotent: they may see an item twice (a correction re-resolves it).

The derived results do not depend on the event: :func:`announce_resolutions` also marks the
project's derived results stale in the resolving transaction (:func:`labeling.derived.
derived_mark`), and their recomputation is scheduled from that mark.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.dispatch import Signal

from labeling.derived import after_commit, derived_mark

items_resolved = Signal()


def announce_resolutions(*, project_id: int, resolved: Iterable[tuple[int, str]]) -> None:
    """Mark the derived results stale and send ``items_resolved`` once the transaction commits.

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

    derived_mark(project_id=project_id)
    after_commit(send)
