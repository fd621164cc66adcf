"""Selectors read: scoped querysets and plain data for pages, the API and stats.

``catalog`` reads imported data and project overviews; further modules read labelling work.
"""

from labeling.selectors.adjudication import AdjudicationView, adjudication_view, disagreement_queue
from labeling.selectors.catalog import (
    DISAGREEMENT_LEVELS,
    ITEM_SORTS,
    PARTITION_KEYS,
    UNASSIGNED,
    BatchSummary,
    PartitionCounts,
    ProjectOverview,
    item_annotators,
    item_answer_labels,
    item_generators,
    item_get,
    item_list,
    project_get_for_user,
    project_list_for_user,
    project_overview,
)
from labeling.selectors.review import (
    LabellingFormView,
    ProgressCounts,
    labelling_form_view,
    labelling_policy_get,
    project_progress,
)
from labeling.selectors.votes import (
    ProjectVotes,
    VersionVotes,
    VoteMatrix,
    project_votes,
    vote_rows,
)
from labeling.selectors.work import assignment_current_for_actor, assignment_get_for_actor

__all__ = [
    "AdjudicationView",
    "LabellingFormView",
    "ProgressCounts",
    "adjudication_view",
    "disagreement_queue",
    "labelling_form_view",
    "labelling_policy_get",
    "project_progress",
    "assignment_current_for_actor",
    "assignment_get_for_actor",
    "BatchSummary",
    "PARTITION_KEYS",
    "PartitionCounts",
    "ProjectOverview",
    "UNASSIGNED",
    "DISAGREEMENT_LEVELS",
    "ITEM_SORTS",
    "item_annotators",
    "item_answer_labels",
    "item_generators",
    "item_get",
    "item_list",
    "project_get_for_user",
    "project_list_for_user",
    "project_overview",
    "ProjectVotes",
    "VersionVotes",
    "VoteMatrix",
    "project_votes",
    "vote_rows",
]
