"""Atomic, idempotent, streaming import of workload records into a project.

Every format (native JSONL and the dataset adapters in ``labeling/importers``) yields native
records; :func:`workload_import` validates and writes them. Guarantees:

- **Atomic.** One transaction; any invalid record refuses the whole import and nothing is
  written. Up to ``MAX_ERRORS`` errors are collected (validation continues after the first, so a
  user can fix several at once), each naming the record, the field and the reason.
- **Idempotent.** Rows are matched on natural keys (question ``external_id``, candidate ``id``,
  source ``id`` + sha256, evaluator name + version, prior annotator). Re-importing the same
  content creates nothing. A question or candidate whose content differs from what is stored is
  refused (labels point at it); a source whose text changed becomes a new source version.
- **Streaming.** Records are processed in chunks of ``CHUNK_SIZE`` with bulk inserts, so memory
  does not grow with the file.

A format may give more than records (``RecordSource``): the label policies the project must hold
(restored into a project without questions), pinned source versions written first and in order
(so a document's version numbers follow the input), and the seed and proportions with which the
records' ``partition`` values are frozen. Records may carry resolutions (a certified release's);
they are written as imported resolutions, and their items are resolved.

Layout:

- ``service``: the entry points (:func:`workload_import`, :func:`workload_import_file`,
  :func:`workload_import_directory`) and the streaming loop; every stream is checked by the one
  stream validator, :func:`labeling.importers.validation.validated_stream`.
- ``writer``: one chunk, table group after table group: ``sources`` (documents, versions,
  retrieval links), ``questions`` (questions, candidates, items, claims), ``evaluators``
  (evaluator labels), ``priors`` (prior annotations) and ``resolutions``; ``state`` holds what
  they share.
- ``policies``: label policies restored and the partition frozen; ``common``: limits, the
  result, fingerprints.
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
