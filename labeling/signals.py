"""The one domain event of the labelling flow: items were resolved.

``items_resolved`` is sent after the transaction that resolved the items commits (consensus,
adjudication or unresolved). Keyword arguments: ``project_id`` (int), ``item_ids`` (tuple of
int, sorted) and ``statuses`` (tuple of resolution statuses, aligned with ``item_ids``).
``certification`` subscribes in its ``AppConfig.ready`` and enqueues its recomputations.
Receivers must be idempotent: they may see an item twice (a correction re-resolves it).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.dispatch import Signal

items_resolved = Signal()


def announce_resolutions(*, project_id: int, resolved: Iterable[tuple[int, str]]) -> None:
    """Send ``items_resolved`` once the current transaction commits.

    Args:
        project_id: the project of every item.
        resolved: (item id, resolution status) pairs; nothing is sent when empty.
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

    transaction.on_commit(send)
