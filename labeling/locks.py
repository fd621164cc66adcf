"""The only ``select_for_update`` querysets of the labelling side (STYLE.md C4, C7)."""

from __future__ import annotations

from labeling.models import Project


def project_lock(project_id: int) -> Project:
    """Lock and return a project row; the caller must be inside ``transaction.atomic``.

    On SQLite ``select_for_update`` is a no-op, but SQLite serialises writers anyway.
    """
    return Project.objects.select_for_update().get(pk=project_id)
