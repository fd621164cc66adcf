"""Selectors read (STYLE.md C4): scoped querysets and plain data for pages, the API and stats.

``catalog`` reads imported data and project overviews; further modules read labelling work.
"""

from labeling.selectors.catalog import (
    PARTITION_KEYS,
    UNASSIGNED,
    BatchSummary,
    PartitionCounts,
    ProjectOverview,
    item_generators,
    item_get,
    item_list,
    project_get_for_user,
    project_list_for_user,
    project_overview,
)

__all__ = [
    "BatchSummary",
    "PARTITION_KEYS",
    "PartitionCounts",
    "ProjectOverview",
    "UNASSIGNED",
    "item_generators",
    "item_get",
    "item_list",
    "project_get_for_user",
    "project_list_for_user",
    "project_overview",
]
