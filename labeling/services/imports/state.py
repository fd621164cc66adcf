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

    Attributes:
        project: the locked target project.
        batch: the import's batch (every row created names it).
        fresh: the project had no questions and no frozen split when the import began.
        created: row counts by table name, for the batch report.
        evaluators: ``{(name, version): id}`` of the project's evaluators.
        document_ids: ``{document key: id}`` of the source documents met so far.
        policy_ids: ``{version: id}`` of the project's label policies.
        newest_policy_id: the id of the newest label policy.
        with_partition: whether records give a partition (the first record decides) and the
            first record's location; None before the first record.
        partitioned: the number of partitioned questions created.
        partition_tokens: ``{(kind, value): (partition, external id)}`` of the groups and
            documents of the partitioned questions created.
        resolved: ``(item id, status)`` of the resolutions written.
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

    Attributes:
        versions: ``{(source id, sha256): source version id}`` of the chunk's sources.
        questions: ``{external id: question id}`` of the chunk's questions.
        existing_ids: the ids of the chunk's questions imported before.
        candidates: ``{(question id, candidate key): candidate id}``.
        claims: ``{(candidate id, claim index): claim id}``.
        items: ``{candidate id: item id}`` of the candidates created with the chunk (their
            items are written last, with their resolutions).
        item_resolutions: ``{item id: (status, resolution id, version)}`` of the chunk's new
            items that the chunk resolves.
        record_sources: ``{external id: {source id: version id}}`` of the chunk's records (a
            chunk holds one record per external id).
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
