"""The labels of a release's pinned state, streamed as labels.jsonl records.

A release's ``cutoff`` holds the largest id of each append-only table when it was frozen; every
query here keeps rows at or below it, so the records are those of that moment whatever was
labelled since. Candidates are read in chunks of ``CHUNK`` with a fixed number of queries per
chunk, so memory does not grow with the release (only the source-version index and the list of
candidate ids, a few bytes per candidate, do).

Record layout: ``labeling/release_format.py`` and README "Releases".
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from array import array
from collections import defaultdict, deque
from collections.abc import Generator, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from django.db import connection, connections
from django.db.models import Exists, F, Lookup, Max, OuterRef

from certification.models import Release
from labeling.models import (
    AnnotationRevision,
    CandidateAnswer,
    Claim,
    ClaimLabel,
    EvaluatorLabel,
    EvidenceSpan,
    GoldReference,
    Item,
    LabelPolicy,
    PriorAnnotation,
    PriorClaimLabel,
    PriorEvidence,
    PriorSpan,
    Question,
    Resolution,
    ResolvedClaimLabel,
    ResolvedEvidence,
    RetrievalLink,
    SourceVersion,
)
from labeling.release_format import (
    CANDIDATE_KEYS,
    CANDIDATE_MODEL_FIELDS,
    finite_or_none,
    iso_utc,
)
from labeling.rows import id_array

logger = logging.getLogger(__name__)

CHUNK = 2000
# Chunks read ahead by as many threads (each with its own connection) while one is consumed.
READ_AHEAD = 2
PSEUDONYM_PREFIX = "r-"


class InIds(Lookup):
    """``column IN ids`` as one parameter.

    It is ``= ANY(%s)`` (an array) on PostgreSQL, ``IN (SELECT value FROM json_each(%s))`` on
    SQLite.

    Django renders ``__in`` with one placeholder per id; for the thousands of ids of a chunk
    that costs more than the query.
    Use as ``Model.objects.filter(InIds(F("candidate_id"), ids))``.

    On PostgreSQL the array is sent as its text, cast to the type psycopg would give a list
    of those ids (the smallest integer type holding the largest): the same SQL, hence the
    same plans (a ``bigint[]`` cast of small ids gets sequential scans on tables without
    statistics yet), without psycopg's adaptation of every element.
    """

    lookup_name = "in_ids"
    prepare_rhs = False

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, tuple[Any, ...]]:
        """Return the SQL and its parameters: the column's, then the ids as one value.

        The ids are a list (a PostgreSQL array) or a JSON text (SQLite), not a ``str | int``
        as the stubs type a parameter, hence ``Any``.
        """
        lhs, params = self.process_lhs(compiler, connection)
        ids = [int(i) for i in self.rhs]
        if connection.vendor == "postgresql":
            largest = max(map(abs, ids), default=0)
            kind = "smallint" if largest < 2**15 else "integer" if largest < 2**31 else "bigint"
            return f"{lhs} = ANY(%s::{kind}[])", (*params, id_array(ids))
        sql = f"{lhs} IN (SELECT value FROM json_each(%s))"  # noqa: S608 - a column, bound ids
        return sql, (*params, f"[{','.join(map(str, ids))}]")


def prefetch_possible() -> bool:
    """Return whether a second connection may read ahead.

    Only on PostgreSQL, outside any transaction: a caller's open transaction (e.g. a test's)
    holds rows other connections cannot see.
    """
    return connection.vendor == "postgresql" and not connection.in_atomic_block


def _in(column: str, ids: Any) -> InIds:
    return InIds(F(column), list(ids))


def pseudonym(key: str, user_id: int) -> str:
    """Return the release pseudonym of account ``user_id`` in a project with secret ``key``.

    ``r-`` + the first 16 hex digits of HMAC-SHA256(key, "user:<id>"): stable across the
    project's releases, not reversible without the key (which never leaves the database).
    """
    digest = hmac.new(key.encode(), f"user:{user_id}".encode(), hashlib.sha256).hexdigest()
    return PSEUDONYM_PREFIX + digest[:16]


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


@dataclass(frozen=True, slots=True)
class SourceRef:
    """A pinned source version as releases name it."""

    key: str
    version: int
    sha256: str
    published_at: str | None
    observed_at: str | None

    def evidence(self, start: int, end: int, quote: str) -> dict[str, Any]:
        """An evidence span in this version."""
        return {
            "source": self.key,
            "version": self.version,
            "sha256": self.sha256,
            "start": start,
            "end": end,
            "quote": quote,
        }


def _sorted_evidence(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if len(spans) < 2:
        return spans
    return sorted(
        spans, key=lambda e: (e["source"], e["version"], e["start"], e["end"], e["quote"])
    )


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

    # -- sources and policies ------------------------------------------------------------------

    def source_records(self) -> Iterator[dict[str, Any]]:
        """Yield sources.jsonl records (with text), ordered by id and version."""
        ids = list(self.sources)  # already in (key, pk) order
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start : start + CHUNK]
            rows = (
                SourceVersion.objects.filter(_in("id", chunk))
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
            CandidateAnswer.objects.filter(_in("id", ids))
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
            RetrievalLink.objects.filter(_in("question_id", question_ids))
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
            Claim.objects.filter(_in("candidate_id", ids))
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
            Item.objects.filter(_in("candidate_id", ids))
            .order_by()
            .values_list("pk", "candidate_id")
        )
        annotations = self._annotations(items, claim_index)
        for candidate_id, entries in self._priors(ids, claim_index).items():
            annotations[candidate_id].extend(entries)
        resolutions = self._resolutions(items, claim_index)
        evaluator_labels = self._evaluator_labels(ids, claim_index)
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
                Question.objects.filter(_in("id", question_ids))
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

    def _annotations(
        self, items: dict[int, int], claim_index: dict[int, int]
    ) -> dict[int, list[dict[str, Any]]]:
        """People's current labels (as of the cutoff), by candidate id."""
        cutoff = self.cutoff["annotation_revision"]
        latest = (
            AnnotationRevision.objects.filter(_in("annotation__item_id", items), pk__lte=cutoff)
            .order_by()
            .values("annotation_id")
            .annotate(last=Max("pk"))
            .values_list("last", flat=True)
        )
        revisions = list(
            AnnotationRevision.objects.filter(_in("id", latest))
            .order_by()
            .values_list(
                "pk",
                "annotation__item_id",
                "annotation__annotator_id",
                "policy_id",
                "created_at",
                "time_spent_seconds",
                "answer_label",
                "answer_reason",
                "comment",
            )
        )
        labels = self._claim_labels(
            ClaimLabel,
            "revision_id",
            [r[0] for r in revisions],
            EvidenceSpan,
            claim_index,
            boundary=True,
        )
        out: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for (
            pk,
            item_id,
            annotator_id,
            policy_id,
            created,
            spent,
            answer,
            reason,
            comment,
        ) in revisions:
            out[items[item_id]].append(
                {
                    "annotator": pseudonym(self.key, annotator_id),
                    "origin": "human",
                    "policy_version": self.policy_versions.get(policy_id),
                    "labelled_at": iso_utc(created),
                    "time_spent_seconds": finite_or_none(spent),
                    "answer_label": answer,
                    "answer_reason": reason,
                    "comment": comment,
                    "claim_labels": [{**label, "raw_label": None} for label in labels.get(pk, [])],
                    "spans": [],
                    "raw": None,
                }
            )
        return out

    def _claim_labels(
        self,
        model: Any,
        parent_field: str,
        parent_ids: list[int],
        evidence_model: Any,
        claim_index: dict[int, int],
        *,
        boundary: bool = False,
        raw: bool = False,
    ) -> dict[int, list[dict[str, Any]]]:
        """Return the claim labels of the given parents, with their evidence, by parent id.

        The parents are revisions, resolutions or prior annotations; labels are in claim order.
        """
        fields = ["pk", parent_field, "claim_id", "label", "reason"]
        if boundary:
            fields.append("boundary_error")
        if raw:
            fields.append("raw_label")
        rows = list(
            model.objects.filter(_in(parent_field, parent_ids)).order_by().values_list(*fields)
        )
        evidence: dict[int, list[dict[str, Any]]] = defaultdict(list)
        sources = self.sources
        # By the labels' own ids (one array parameter): an index scan, where a join on the
        # parents' ids scans the whole evidence table.
        for label_id, version_id, start, end, quote in (
            evidence_model.objects.filter(_in("claim_label_id", [r[0] for r in rows]))
            .order_by()
            .values_list("claim_label_id", "source_version_id", "start", "end", "quote")
        ):
            evidence[label_id].append(sources[version_id].evidence(start, end, quote))
        out: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for pk, parent_id, claim_id, label, reason, *extra in rows:
            entry = {
                "claim": claim_index[claim_id],
                "label": label,
                "reason": reason,
                "evidence": _sorted_evidence(evidence.get(pk, [])),
            }
            if boundary:
                entry["boundary_error"] = extra[0]
            if raw:
                entry["raw_label"] = extra[-1]
            out[parent_id].append(entry)
        for entries in out.values():
            entries.sort(key=lambda e: e["claim"])
        return out

    def _priors(
        self, ids: list[int], claim_index: dict[int, int]
    ) -> dict[int, list[dict[str, Any]]]:
        """Imported annotators' labels, by candidate id."""
        priors = list(
            PriorAnnotation.objects.filter(
                _in("candidate_id", ids), pk__lte=self.cutoff["prior_annotation"]
            )
            .order_by()
            .values_list(
                "pk",
                "candidate_id",
                "annotator",
                "origin",
                "policy_id",
                "labelled_at",
                "time_spent_seconds",
                "answer_label",
                "answer_reason",
                "note",
                "raw",
            )
        )
        prior_ids = [p[0] for p in priors]
        labels = self._claim_labels(
            PriorClaimLabel,
            "prior_annotation_id",
            prior_ids,
            PriorEvidence,
            claim_index,
            boundary=True,
            raw=True,
        )
        spans: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for row in (
            PriorSpan.objects.filter(_in("prior_annotation_id", prior_ids))
            .order_by("prior_annotation_id", "start", "pk")
            .values_list(
                "prior_annotation_id",
                "start",
                "end",
                "quote",
                "labels",
                "note",
                "evidence_source_version_id",
                "evidence_start",
                "evidence_end",
                "evidence_quote",
            )
        ):
            prior_id, start, end, quote, span_labels, note, version_id, e_start, e_end, e_quote = (
                row
            )
            # The four evidence columns are set together or not at all (the
            # prior_span_evidence_complete constraint).
            evidence = None
            if (
                version_id is not None
                and e_start is not None
                and e_end is not None
                and e_quote is not None
            ):
                evidence = self.sources[version_id].evidence(e_start, e_end, e_quote)
            spans[prior_id].append(
                {
                    "start": start,
                    "end": end,
                    "quote": quote,
                    "labels": span_labels,
                    "note": note,
                    "evidence": evidence,
                }
            )
        out: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for (
            pk,
            candidate_id,
            annotator,
            origin,
            policy_id,
            labelled,
            spent,
            answer,
            reason,
            note,
            raw,
        ) in priors:
            out[candidate_id].append(
                {
                    "annotator": annotator,
                    "origin": origin,
                    "policy_version": self.policy_versions.get(policy_id) if policy_id else None,
                    "labelled_at": iso_utc(labelled),
                    "time_spent_seconds": finite_or_none(spent),
                    "answer_label": answer,
                    "answer_reason": reason,
                    "comment": note,
                    "claim_labels": labels.get(pk, []),
                    "spans": spans.get(pk, []),
                    "raw": raw,
                }
            )
        return out

    def _resolutions(
        self, items: dict[int, int], claim_index: dict[int, int]
    ) -> dict[int, dict[str, Any]]:
        """The current resolution of each item as of the cutoff (highest number), by candidate."""
        latest = (
            Resolution.objects.filter(_in("item_id", items), pk__lte=self.cutoff["resolution"])
            .order_by()
            .values("item_id")
            .annotate(last=Max("number"))
        )
        wanted = {(row["item_id"], row["last"]) for row in latest}
        rows = [
            row
            for row in Resolution.objects.filter(_in("item_id", [i for i, _ in wanted]))
            .order_by()
            .values_list(
                "pk",
                "item_id",
                "number",
                "status",
                "policy_id",
                "answer_label",
                "answer_reason",
                "unresolved_reason",
                "rationale",
                "adjudicator_id",
                "adjudicator_pseudonym",
                "created_at",
            )
            if (row[1], row[2]) in wanted
        ]
        labels = self._claim_labels(
            ResolvedClaimLabel, "resolution_id", [r[0] for r in rows], ResolvedEvidence, claim_index
        )
        out: dict[int, dict[str, Any]] = {}
        for (
            pk,
            item_id,
            _,
            status,
            policy_id,
            answer,
            reason,
            unresolved,
            rationale,
            adj_id,
            adj_name,
            created,
        ) in rows:
            out[items[item_id]] = {
                "status": status,
                "answer_label": answer,
                "answer_reason": reason,
                "unresolved_reason": unresolved,
                "rationale": rationale,
                "adjudicator": pseudonym(self.key, adj_id) if adj_id is not None else adj_name,
                "resolved_at": iso_utc(created),
                "policy_version": self.policy_versions.get(policy_id),
                "claim_labels": labels.get(pk, []),
            }
        return out

    def _evaluator_labels(
        self, ids: list[int], claim_index: dict[int, int]
    ) -> dict[int, list[dict[str, Any]]]:
        """Automated judges' labels, kept apart from people's, by candidate id."""
        out: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for (
            candidate_id,
            name,
            version,
            claim_id,
            label,
            score,
            available,
            raw,
        ) in (
            EvaluatorLabel.objects.filter(
                _in("candidate_id", ids), pk__lte=self.cutoff["evaluator_label"]
            )
            .order_by()
            .values_list(
                "candidate_id",
                "evaluator__name",
                "evaluator__version",
                "claim_id",
                "label",
                "score",
                "available",
                "raw",
            )
        ):
            out[candidate_id].append(
                {
                    "evaluator": name,
                    "version": version,
                    "claim": None if claim_id is None else claim_index[claim_id],
                    "label": label,
                    "score": finite_or_none(score),
                    "available": available,
                    "raw": raw,
                }
            )
        for entries in out.values():
            entries.sort(
                key=lambda e: (
                    e["evaluator"],
                    e["version"],
                    -1 if e["claim"] is None else e["claim"],
                )
            )
        return out
