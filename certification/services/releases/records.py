"""The labels of a release's pinned state, streamed as labels.jsonl records.

A release's ``cutoff`` holds the largest id of each append-only table when it was frozen; every
query here keeps rows at or below it, so the records are those of that moment whatever was
labelled since. Candidates are read in chunks of ``CHUNK`` with a fixed number of queries per
chunk, so memory does not grow with the release (only the source-version index and the list of
candidate ids, a few bytes per candidate, do). A chunk's labels are read by
:class:`~certification.services.releases.label_reads.ChunkLabels`.

Record layout: ``labeling/release_format.py`` and README "Releases".
"""

from __future__ import annotations

import logging
import re
from array import array
from collections import defaultdict, deque
from collections.abc import Generator, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from django.db import connection, connections
from django.db.models import Exists, OuterRef

from certification.models import Release
from certification.services.releases.label_reads import ChunkLabels, SourceRef, ids_in, pseudonym
from labeling.models import (
    CandidateAnswer,
    Claim,
    GoldReference,
    Item,
    LabelPolicy,
    Question,
    RetrievalLink,
    SourceVersion,
)
from labeling.release_format import CANDIDATE_KEYS, CANDIDATE_MODEL_FIELDS, finite_or_none, iso_utc

logger = logging.getLogger(__name__)

CHUNK = 2000
# Chunks read ahead by as many threads (each with its own connection) while one is consumed.
READ_AHEAD = 2


def prefetch_possible() -> bool:
    """Return whether a second connection may read ahead.

    Only on PostgreSQL, outside any transaction: a caller's open transaction (e.g. a test's)
    holds rows other connections cannot see.
    """
    return connection.vendor == "postgresql" and not connection.in_atomic_block


_RATER = re.compile(r"^(user):(\d+)$|^prior:(.+)$", re.DOTALL)


def pseudonymise_raters(value: Any, key: str) -> Any:
    """Replace agreement rater ids in ``value`` (keys and strings, recursively) by pseudonyms.

    ``user:<id>`` becomes :func:`pseudonym`; ``prior:<name>`` becomes ``<name>`` (imported
    annotators already are pseudonyms), as in labels.jsonl.
    """

    def one(text: str) -> str:
        match = _RATER.match(text)
        if match is None:
            return text
        if match.group(1):
            return pseudonym(key, int(match.group(2)))
        return match.group(3)

    if isinstance(value, dict):
        return {
            one(k) if isinstance(k, str) else k: pseudonymise_raters(v, key)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [pseudonymise_raters(v, key) for v in value]
    if isinstance(value, str):
        return one(value)
    return value


class ReleaseReader:
    """Reads the pinned state of one release: sources, policies and label records.

    Args:
        release: the frozen release (its project, ``cutoff`` and pseudonym key are used).
    """

    def __init__(self, release: Release) -> None:
        self.release = release
        self.project = release.project
        self.cutoff: Mapping[str, int] = release.cutoff
        self.key = self.project.pseudonym_key
        # A split frozen after the release is not the release's: its questions stay without one.
        self.partitioned = bool(release.partition.get("frozen"))
        self.sources: dict[int, SourceRef] = {}
        # The cutoff is applied here, not in SQL: with the statistics of a table just filled
        # by an import, PostgreSQL intersects the primary key's whole range with each
        # document's versions.
        versions = (
            SourceVersion.objects.filter(document__project=self.project)
            .order_by("document__key", "pk")
            .values_list("pk", "document__key", "sha256", "published_at", "observed_at")
        )
        largest = self.cutoff["source_version"]
        counter: dict[str, int] = defaultdict(int)
        for pk, key, sha256, published, observed in versions.iterator(chunk_size=5000):
            if pk > largest:
                continue
            counter[key] += 1
            self.sources[pk] = SourceRef(
                key, counter[key], sha256, iso_utc(published), iso_utc(observed)
            )
        self.policy_versions: dict[int, int] = dict(
            LabelPolicy.objects.filter(
                project=self.project, pk__lte=self.cutoff["label_policy"]
            ).values_list("pk", "version")
        )
        self.labels = ChunkLabels(
            cutoff=self.cutoff,
            key=self.key,
            sources=self.sources,
            policy_versions=self.policy_versions,
        )

    # -- sources and policies ------------------------------------------------------------------

    def source_records(self) -> Iterator[dict[str, Any]]:
        """Yield sources.jsonl records (with text), ordered by id and version."""
        ids = list(self.sources)  # already in (key, pk) order
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start : start + CHUNK]
            rows = (
                SourceVersion.objects.filter(ids_in("id", chunk))
                .order_by()
                .values_list("pk", "text", "length", "uri")
            )
            by_id = {pk: (text, length, uri) for pk, text, length, uri in rows}
            for pk in chunk:
                ref = self.sources[pk]
                text, length, uri = by_id[pk]
                yield {
                    "id": ref.key,
                    "version": ref.version,
                    "sha256": ref.sha256,
                    "length": length,
                    "uri": uri,
                    "published_at": ref.published_at,
                    "observed_at": ref.observed_at,
                    "text": text,
                }

    def policy_records(self) -> list[dict[str, Any]]:
        """The project's label policy versions (as of the cutoff), oldest first."""
        return [
            {
                "version": policy.version,
                "guideline": policy.guideline,
                "evidence_relation": policy.evidence_relation,
                "answer_labels": policy.answer_labels,
                "claim_labels": policy.claim_labels,
                "unavailable_reasons": policy.unavailable_reasons,
            }
            for policy in LabelPolicy.objects.filter(pk__in=list(self.policy_versions)).order_by(
                "version"
            )
        ]

    # -- labels ---------------------------------------------------------------------------------

    def candidate_ids(self) -> array:
        """Return the ids of the release's candidates in record order, as a compact array.

        Every candidate of the project as of the cutoff but those of gold items.

        The order is question id, sample index, id; the array takes 8 bytes per candidate.
        """
        # Gold items check annotators; their labels are no votes and their reference is no
        # resolved label, so they are never released.
        gold = GoldReference.objects.filter(
            item__candidate=OuterRef("pk"), pk__lte=self.cutoff.get("gold_reference", 0)
        )
        ids = (
            CandidateAnswer.objects.filter(question__project=self.project)
            .exclude(Exists(gold))
            .order_by("question__external_id", "sample_index", "key")
            .values_list("pk", flat=True)
        )
        # The cutoff is applied here, not in SQL: with the statistics of tables just filled by
        # an import, PostgreSQL intersects the primary key's whole range with each question's
        # candidates (measured: 250 s for 50,000 candidates, against 0.3 s).
        largest = self.cutoff["candidate"]
        return array("q", (pk for pk in ids.iterator(chunk_size=10_000) if pk <= largest))

    def records(
        self, candidate_ids: Sequence[int], *, prefetch: bool = False
    ) -> Generator[dict[str, Any], None, None]:
        """Yield the labels.jsonl record of each candidate, in the order of ``candidate_ids``.

        With ``prefetch``, a second thread (with its own database connection) reads the next
        chunk while the caller consumes this one, so the database's time overlaps the
        caller's. Only for committed data: another connection cannot see an open
        transaction's rows (:func:`prefetch_possible`).
        """
        chunks = [
            list(candidate_ids[start : start + CHUNK])
            for start in range(0, len(candidate_ids), CHUNK)
        ]
        if not prefetch:
            for chunk in chunks:
                yield from self._chunk(chunk)
            return
        with ThreadPoolExecutor(max_workers=READ_AHEAD, thread_name_prefix="release-read") as pool:
            pending: deque[Future[list[dict[str, Any]]]] = deque()
            try:
                for chunk in chunks:
                    pending.append(pool.submit(self._chunk_list, chunk))
                    if len(pending) == READ_AHEAD:
                        yield from pending.popleft().result()
                while pending:
                    yield from pending.popleft().result()
            finally:
                for future in pending:
                    future.cancel()
                wait(pending)  # a chunk being read when the consumer stopped

    def _chunk_list(self, ids: list[int]) -> list[dict[str, Any]]:
        """Read one chunk on a reading thread, then close that thread's connection.

        A connection per chunk rather than one per thread closed at the
        end: a reader finalised late, by the garbage collector, finds its threads gone and
        could not hand them a last task.
        """
        try:
            return list(self._chunk(ids))
        finally:
            connections.close_all()

    def _chunk(self, ids: list[int]) -> Iterator[dict[str, Any]]:
        # (question id, candidate record) by candidate id.
        candidates: dict[int, tuple[int, dict[str, Any]]] = {}
        for pk, question_id, *values in (
            CandidateAnswer.objects.filter(ids_in("id", ids))
            .order_by()
            .values_list("pk", "question_id", *CANDIDATE_MODEL_FIELDS)
        ):
            # A score that is NaN or infinite is written as null (JSON cannot hold it).
            candidates[pk] = (
                question_id,
                {
                    key: finite_or_none(value) if isinstance(value, float) else value
                    for key, value in zip(CANDIDATE_KEYS, values, strict=True)
                },
            )
        question_ids = {question_id for question_id, _ in candidates.values()}
        links: dict[int, list[dict[str, Any]]] = defaultdict(list)
        sources = self.sources
        # The source cutoff is applied here: the index holds the versions up to it only (in
        # SQL, PostgreSQL may scan the whole range of versions per chunk).
        for question_id, version_id, rank, score in (
            RetrievalLink.objects.filter(ids_in("question_id", question_ids))
            .order_by()
            .values_list("question_id", "source_version_id", "rank", "score")
        ):
            ref = sources.get(version_id)
            if ref is None:
                continue
            links[question_id].append(
                {
                    "id": ref.key,
                    "version": ref.version,
                    "sha256": ref.sha256,
                    "rank": rank,
                    "score": finite_or_none(score),
                    "published_at": ref.published_at,
                    "observed_at": ref.observed_at,
                }
            )
        claims: dict[int, list[dict[str, Any]]] = defaultdict(list)
        claim_index: dict[int, int] = {}
        for pk, candidate_id, index, text, start, end, machine_split in (
            Claim.objects.filter(ids_in("candidate_id", ids))
            .order_by("candidate_id", "index")
            .values_list("pk", "candidate_id", "index", "text", "start", "end", "machine_split")
        ):
            claim_index[pk] = index
            claims[candidate_id].append(
                {
                    "index": index,
                    "text": text,
                    "start": start,
                    "end": end,
                    "machine_split": machine_split,
                }
            )
        items = dict(
            Item.objects.filter(ids_in("candidate_id", ids))
            .order_by()
            .values_list("pk", "candidate_id")
        )
        annotations = self.labels.annotations(items, claim_index)
        for candidate_id, entries in self.labels.priors(ids, claim_index).items():
            annotations[candidate_id].extend(entries)
        resolutions = self.labels.resolutions(items, claim_index)
        evaluator_labels = self.labels.evaluator_labels(ids, claim_index)
        # One dict per question, shared by its candidates' records (read, never changed).
        questions = {
            pk: {
                "id": external_id,
                "text": text,
                "group_key": group_key,
                "partition": partition if self.partitioned else None,
                "slices": slices,
                "metadata": metadata,
                "sources": sorted(
                    links.get(pk, []),
                    key=lambda s: (s["rank"] is None, s["rank"] or 0, s["id"], s["version"]),
                ),
            }
            for pk, external_id, text, group_key, partition, slices, metadata in (
                Question.objects.filter(ids_in("id", question_ids))
                .order_by()
                .values_list(
                    "pk", "external_id", "text", "group_key", "partition", "slices", "metadata"
                )
            )
        }
        for candidate_id in ids:
            question_id, candidate = candidates[candidate_id]
            yield {
                "question": questions[question_id],
                "candidate": candidate,
                "claims": claims.get(candidate_id, []),
                # One annotator may have labelled the item under several policy versions
                # (returned for labelling): the version then orders their annotations.
                "annotations": sorted(
                    annotations.get(candidate_id, []),
                    key=lambda a: (
                        a["annotator"],
                        a["policy_version"] or 0,
                        a["labelled_at"] or "",
                    ),
                ),
                "resolution": resolutions.get(candidate_id),
                "evaluator_labels": evaluator_labels.get(candidate_id, []),
            }
