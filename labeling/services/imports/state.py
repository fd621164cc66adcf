"""The state one import keeps from chunk to chunk, and the ids one chunk resolves."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from labeling.importers.schema import WorkloadRecord
from labeling.models import Evaluator, ImportBatch, Project

# A chunk of validated records: (location, record) pairs.
Chunk = list[tuple[str, WorkloadRecord]]


class ImportState:
    """What the writers of one import share, inside the import's transaction.

    ``project`` is locked; every row created names ``batch``; ``fresh``: the project had no
    questions and no frozen split when the import began; ``created`` counts rows by table for
    the batch report. ``evaluators``, ``document_ids`` (met so far) and ``policy_ids`` map
    natural keys to ids. ``with_partition`` says whether records give a partition (the first
    record decides) with that record's location, None before it; ``partition_tokens`` map
    ``(kind, value)`` of the created partitioned questions' groups and documents to
    ``(partition, external id)``; ``resolved`` lists ``(item id, status)`` written.
    """

    def __init__(self, project: Project, batch: ImportBatch, fresh: bool) -> None:
        """Read the project's evaluators and policies; ``fresh`` as the attribute."""
        self.project = project
        self.batch = batch
        self.fresh = fresh
        self.created: Counter[str] = Counter()
        self.evaluators = {(e.name, e.version): e.pk for e in project.evaluators.all()}
        self.document_ids: dict[str, int] = {}
        self.policy_ids: dict[int, int] = dict(project.policies.values_list("version", "pk"))
        self.newest_policy_id = self.policy_ids[max(self.policy_ids)]
        self.with_partition: tuple[bool, str] | None = None
        self.partitioned = 0
        self.partition_tokens: dict[tuple[str, str], tuple[str | None, str]] = {}
        self.resolved: list[tuple[int, str]] = []

    def evaluator_id(self, name: str, version: str) -> int:
        """Return the id of evaluator ``name`` at ``version``, creating it when new."""
        key = (name, version)
        if key not in self.evaluators:
            evaluator = Evaluator.objects.create(project=self.project, name=name, version=version)
            self.created["evaluators"] += 1
            self.evaluators[key] = evaluator.pk
        return self.evaluators[key]


@dataclass
class ChunkKeys:
    """The ids one chunk's rows resolve to, filled as the chunk is written.

    Maps from natural keys to ids: ``versions`` ``(source id, sha256)``, ``questions`` external
    id, ``candidates`` ``(question id, candidate key)``, ``claims`` ``(candidate id, claim
    index)``; ``existing_ids`` are the chunk's questions imported before. ``items`` map the
    candidates created with the chunk to their item ids (written last, with their resolutions),
    ``item_resolutions`` the new items the chunk resolves to ``(status, resolution id,
    version)``; ``record_sources`` map each record's external id (one per chunk) to ``{source id:
    version id}``.
    """

    versions: dict[tuple[str, str], int]
    questions: dict[str, int] = field(default_factory=dict)
    existing_ids: set[int] = field(default_factory=set)
    candidates: dict[tuple[int, str], int] = field(default_factory=dict)
    claims: dict[tuple[int, int], int] = field(default_factory=dict)
    items: dict[int, int] = field(default_factory=dict)
    item_resolutions: dict[int, tuple[str, int, int]] = field(default_factory=dict)
    record_sources: dict[str, dict[str, int]] = field(default_factory=dict)

    def remember_sources(self, chunk: Chunk, entries: list[tuple[str, str]]) -> None:
        """Fill ``record_sources`` from the chunk's sources, hashed once.

        ``entries`` are the ``(source id, sha256)`` of the chunk's sources, record by record and
        source by source (as ``labeling.services.imports.sources.record_sources`` gives them).
        """
        keys = iter(entries)
        for _, record in chunk:
            self.record_sources[record.external_id] = {
                s.id: self.versions[next(keys)] for s in record.sources
            }

    def sources(self, record: WorkloadRecord) -> dict[str, int]:
        """Return ``{source id: version id}`` of the sources ``record`` gives."""
        return self.record_sources[record.external_id]
