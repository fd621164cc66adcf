"""Services are the only code that writes; each public service is atomic and checks its own rules.

Helpers the services share (``comparison.items_compare``, ``claim_labels.claim_labels_write``)
are not entry points and are imported from their modules.
"""

from labeling.services.adjudication import adjudication_mark_unresolved, adjudication_resolve
from labeling.services.annotations import annotation_submit
from labeling.services.assignments import item_claim_ahead, item_claim_next
from labeling.services.comparison import CompareResult
from labeling.services.evaluator_labels import (
    evaluator_labels_import,
    evaluator_labels_import_file,
)
from labeling.services.imports import ImportResult, workload_import, workload_import_file
from labeling.services.integrity import source_versions_verify
from labeling.services.items import BulkResult, items_bulk_prioritise, items_return_to_queue
from labeling.services.label_checks import AnnotationInput, ClaimInput, EvidenceInput
from labeling.services.labelling_queue import (
    items_enqueue,
    items_prioritise,
    project_labelling_configure,
    project_labelling_start,
)
from labeling.services.leases import assignments_release_expired
from labeling.services.members import membership_set
from labeling.services.partitions import PartitionResult, partition_freeze
from labeling.services.projects import policy_create, project_create
from labeling.services.skips import assignment_skip, assignment_skip_undo

__all__ = [
    "AnnotationInput",
    "ClaimInput",
    "CompareResult",
    "EvidenceInput",
    "adjudication_mark_unresolved",
    "adjudication_resolve",
    "annotation_submit",
    "assignment_skip",
    "assignment_skip_undo",
    "evaluator_labels_import",
    "evaluator_labels_import_file",
    "assignments_release_expired",
    "item_claim_ahead",
    "item_claim_next",
    "items_enqueue",
    "items_prioritise",
    "BulkResult",
    "items_bulk_prioritise",
    "items_return_to_queue",
    "project_labelling_configure",
    "project_labelling_start",
    "ImportResult",
    "PartitionResult",
    "membership_set",
    "partition_freeze",
    "policy_create",
    "project_create",
    "source_versions_verify",
    "workload_import",
    "workload_import_file",
]
