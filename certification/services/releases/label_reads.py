"""The labels of a release's candidates as of its cutoff, read a chunk at a time.

:class:`ChunkLabels` reads people's current labels (pseudonymised, :func:`pseudonym`),
imported annotators' labels, resolutions and evaluator labels of a chunk of candidates, with a
fixed number of queries per chunk; :class:`InIds` passes a chunk's ids as one parameter.
"""

from __future__ import annotations

import hashlib
import hmac
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import F, Lookup, Max

from labeling.models import (
    AnnotationRevision,
    ClaimLabel,
    EvaluatorLabel,
    PriorAnnotation,
    PriorClaimLabel,
    PriorSpan,
    Resolution,
    ResolvedClaimLabel,
)
from labeling.release_format import finite_or_none, iso_utc
from labeling.rows import id_array
from labeling.services.claim_labels import evidence_model

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


def ids_in(column: str, ids: Any) -> InIds:
    """Return the condition ``column IN ids`` as one parameter (:class:`InIds`)."""
    return InIds(F(column), list(ids))


def pseudonym(key: str, user_id: int) -> str:
    """Return the release pseudonym of account ``user_id`` in a project with secret ``key``.

    ``r-`` + the first 16 hex digits of HMAC-SHA256(key, "user:<id>"): stable across the
    project's releases, not reversible without the key (which never leaves the database).
    """
    digest = hmac.new(key.encode(), f"user:{user_id}".encode(), hashlib.sha256).hexdigest()
    return PSEUDONYM_PREFIX + digest[:16]


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


class ChunkLabels:
    """The labels of a chunk of a release's candidates as of its cutoff, by candidate id.

    People's current labels, imported annotators' labels, resolutions and evaluator labels; the
    reads of :class:`~certification.services.releases.records.ReleaseReader`, which shares its
    pinned sources and policy versions.
    """

    def __init__(
        self,
        *,
        cutoff: Mapping[str, int],
        key: str,
        sources: Mapping[int, SourceRef],
        policy_versions: Mapping[int, int],
    ) -> None:
        self.cutoff = cutoff
        self.key = key
        self.sources = sources
        self.policy_versions = policy_versions

    def annotations(
        self, items: dict[int, int], claim_index: dict[int, int]
    ) -> dict[int, list[dict[str, Any]]]:
        """People's current labels (as of the cutoff), by candidate id."""
        cutoff = self.cutoff["annotation_revision"]
        latest = (
            AnnotationRevision.objects.filter(ids_in("annotation__item_id", items), pk__lte=cutoff)
            .order_by()
            .values("annotation_id")
            .annotate(last=Max("pk"))
            .values_list("last", flat=True)
        )
        revisions = list(
            AnnotationRevision.objects.filter(ids_in("id", latest))
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
            ClaimLabel, "revision_id", [r[0] for r in revisions], claim_index, boundary=True
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
            model.objects.filter(ids_in(parent_field, parent_ids)).order_by().values_list(*fields)
        )
        evidence: dict[int, list[dict[str, Any]]] = defaultdict(list)
        sources = self.sources
        spans: Any = evidence_model(model)
        # By the labels' own ids (one array parameter): an index scan, where a join on the
        # parents' ids scans the whole evidence table.
        for label_id, version_id, start, end, quote in (
            spans.objects.filter(ids_in("claim_label_id", [r[0] for r in rows]))
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

    def priors(
        self, ids: list[int], claim_index: dict[int, int]
    ) -> dict[int, list[dict[str, Any]]]:
        """Imported annotators' labels, by candidate id."""
        priors = list(
            PriorAnnotation.objects.filter(
                ids_in("candidate_id", ids), pk__lte=self.cutoff["prior_annotation"]
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
            PriorClaimLabel, "prior_annotation_id", prior_ids, claim_index, boundary=True, raw=True
        )
        spans: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for row in (
            PriorSpan.objects.filter(ids_in("prior_annotation_id", prior_ids))
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

    def resolutions(
        self, items: dict[int, int], claim_index: dict[int, int]
    ) -> dict[int, dict[str, Any]]:
        """The current resolution of each item as of the cutoff (highest number), by candidate."""
        latest = (
            Resolution.objects.filter(ids_in("item_id", items), pk__lte=self.cutoff["resolution"])
            .order_by()
            .values("item_id")
            .annotate(last=Max("number"))
        )
        wanted = {(row["item_id"], row["last"]) for row in latest}
        rows = [
            row
            for row in Resolution.objects.filter(ids_in("item_id", [i for i, _ in wanted]))
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
            ResolvedClaimLabel, "resolution_id", [r[0] for r in rows], claim_index
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

    def evaluator_labels(
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
                ids_in("candidate_id", ids), pk__lte=self.cutoff["evaluator_label"]
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
