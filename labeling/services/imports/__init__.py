"""Atomic, idempotent, streaming import of workload records into a project.

Every format yields native records; :func:`workload_import` validates and writes them.

- **Atomic.** One transaction; any invalid record refuses the whole import. Up to ``MAX_ERRORS``
  errors are collected, each naming the record, the field and the reason.
- **Idempotent.** Rows are matched on natural keys (question ``external_id``, candidate ``id``,
  source ``id`` + sha256, evaluator name + version, prior annotator); the same content again
  creates nothing. A question or candidate whose content differs from what is stored is refused;
  a source whose text changed becomes a new source version.
- **Streaming.** Chunks of ``CHUNK_SIZE`` with bulk inserts: memory does not grow with the file.

A ``RecordSource`` may also carry label policies (restored into a project without questions),
pinned source versions (written first and in order) and the partition's seed and proportions;
records may carry resolutions, written as imported resolutions.
"""

from labeling.services.imports.common import (
    BULK_BATCH,
    CHUNK_SIZE,
    GC_EVERY_CHUNKS,
    MAX_ERRORS,
    ImportResult,
    fingerprint,
    policy_vocabulary,
    same_label,
    text_sha256,
)
from labeling.services.imports.priors import prior_fingerprint
from labeling.services.imports.questions import frequency_ranks
from labeling.services.imports.service import (
    workload_import,
    workload_import_directory,
    workload_import_file,
)

__all__ = [
    "BULK_BATCH",
    "CHUNK_SIZE",
    "GC_EVERY_CHUNKS",
    "MAX_ERRORS",
    "ImportResult",
    "fingerprint",
    "frequency_ranks",
    "policy_vocabulary",
    "prior_fingerprint",
    "same_label",
    "text_sha256",
    "workload_import",
    "workload_import_directory",
    "workload_import_file",
]
