"""Services write (STYLE.md C3); each public service is atomic and checks its own rules."""

from labeling.services.imports import ImportResult, workload_import, workload_import_file
from labeling.services.integrity import source_versions_verify
from labeling.services.partitions import PartitionResult, partition_freeze
from labeling.services.projects import membership_set, policy_create, project_create

__all__ = [
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
