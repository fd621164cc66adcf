"""Writing questions, their candidates (with items) and the candidates' claims.

Questions are matched on ``external_id`` and candidates on their key within the question; both
are immutable once imported (labels point at them), so a re-import must give the same content
(compared by fingerprint). A question's candidates are fixed at its first import. Partitions are
checked here too: see :func:`check_partition`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any, Protocol

from django.utils import timezone

from labeling.bulk import ids_by_key, insert_rows, reserve_ids
from labeling.importers.record_errors import RecordError, echo
from labeling.importers.record_rules import locate_claim
from labeling.importers.schema import CandidateIn, ClaimIn, WorkloadRecord
from labeling.models import CandidateAnswer, Claim, Item, ItemStatus, Question
from labeling.release_format import CANDIDATE_KEYS, CANDIDATE_MODEL_FIELDS
from labeling.rows import db_datetime
from labeling.services.imports.common import differing_field, fingerprint, json_value
from labeling.services.imports.state import Chunk, ChunkKeys, ImportState

CANDIDATE_COLUMNS = ("question_id", *CANDIDATE_MODEL_FIELDS, "fingerprint")
QUESTION_COLUMNS = (
    "project_id",
    "external_id",
    "text",
    "group_key",
    "slices",
    "metadata",
    "fingerprint",
    "import_batch_id",
    "created_at",
    "partition",
)
ITEM_COLUMNS = (
    "id",
    "project_id",
    "candidate_id",
    "created_at",
    "status",
    "resolution_id",
    "version",
)
CLAIM_COLUMNS = ("candidate_id", "index", "text", "start", "end", "unanchored", "machine_split")


class RankedSample(Protocol):
    """A sampled answer as :func:`frequency_ranks` reads it (imported, or new traffic's)."""

    @property
    def canonical_form(self) -> str | None: ...  # noqa: D102

    @property
    def sample_index(self) -> int | None: ...  # noqa: D102


def frequency_ranks(candidates: Sequence[RankedSample]) -> list[int | None]:
    """Rank each candidate's canonical form by frequency among the question's K samples.

    Rank 1 is the most frequent form; candidates sharing a form share its rank (dense ranks).
    Tie rule: among forms with equal counts, the form first seen at the lower sample index ranks
    higher (a candidate without a sample index counts at its position). Candidates without a
    canonical form (e.g. no extractable answer) get None.
    """
    counts: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    for position, candidate in enumerate(candidates):
        form = candidate.canonical_form
        if form is None:
            continue
        counts[form] += 1
        index = position if candidate.sample_index is None else candidate.sample_index
        first_seen[form] = min(first_seen.get(form, index), index)
    order = sorted(counts, key=lambda form: (-counts[form], first_seen[form]))
    rank = {form: r for r, form in enumerate(order, start=1)}
    return [None if c.canonical_form is None else rank[c.canonical_form] for c in candidates]


def _question_fields(record: WorkloadRecord) -> dict[str, Any]:
    return {
        "text": record.text,
        "group_key": record.group_key,
        "slices": record.slices,
        "metadata": record.metadata,
    }


def _question_fields_of(question: Question) -> dict[str, Any]:
    return {
        "text": question.text,
        "group_key": question.group_key,
        "slices": question.slices,
        "metadata": question.metadata,
    }


def _candidate_fields(candidate: CandidateIn, sample_index: int) -> dict[str, Any]:
    data = candidate.model_dump(
        mode="json", exclude={"evaluator_labels", "prior_annotations", "resolution", "gold"}
    )
    data["sample_index"] = sample_index
    # ``unanchored`` came later: left out while false, so earlier fingerprints still match.
    for claim in data["claims"]:
        if not claim["unanchored"]:
            del claim["unanchored"]
    return data


def _candidate_row(
    question_id: int, candidate: CandidateIn, index: int, rank: int | None, fp: str
) -> tuple[Any, ...]:
    """Return the ``CANDIDATE_COLUMNS`` row of a new candidate."""
    computed = {
        "generator_settings": json_value(candidate.generator_settings),
        "sample_index": index,
        "frequency_rank": candidate.frequency_rank or rank,
        "metadata": json_value(candidate.metadata),
    }
    values = (
        computed[key] if key in computed else getattr(candidate, key) for key in CANDIDATE_KEYS
    )
    return (question_id, *values, fp)


def write_questions(state: ImportState, chunk: Chunk, keys: ChunkKeys) -> None:
    """Create the chunk's new questions; check the stored ones are unchanged.

    Fills ``keys.questions`` and ``keys.existing_ids``.

    Raises:
        RecordError: a changed question, a new question after the partition freeze, or a
            partition refused by :func:`check_partition`.
    """
    found = ids_by_key(
        Question, "external_id", [r.external_id for _, r in chunk], project_id=state.project.pk
    )
    existing = {q.external_id: q for q in Question.objects.filter(pk__in=list(found.values()))}
    new_questions: list[tuple[str, tuple[Any, ...]]] = []
    now = db_datetime(timezone.now())
    for location, record in chunk:
        given = _question_fields(record)
        stored = existing.get(record.external_id)
        check_partition(state, location, record, stored)
        if stored is None:
            if state.project.partition_frozen_at is not None:
                raise RecordError(
                    location,
                    "external_id",
                    f"question {echo(record.external_id)} is new but the project's partition is "
                    "frozen; new questions cannot join a frozen split",
                )
            row = (
                state.project.pk,
                record.external_id,
                record.text,
                record.group_key,
                json_value(record.slices),
                json_value(record.metadata),
                fingerprint(given),
                state.batch.pk,
                now,
                record.partition,
            )
            new_questions.append((record.external_id, row))
            continue
        if stored.fingerprint != fingerprint(given):
            name = differing_field(_question_fields_of(stored), given)
            raise RecordError(
                location,
                name,
                f"question {echo(record.external_id)} was imported before (earlier in this file "
                f"or in an earlier import) with a different {name}; questions are immutable "
                "(use a new external_id)",
            )
        keys.questions[record.external_id] = stored.pk
    question_ids = insert_rows(
        Question, QUESTION_COLUMNS, [row for _, row in new_questions], with_ids=True
    )
    keys.questions.update(
        {external_id: pk for (external_id, _), pk in zip(new_questions, question_ids, strict=True)}
    )
    state.created["questions"] += len(new_questions)
    keys.existing_ids = {q.pk for q in existing.values()}


def check_partition(
    state: ImportState, location: str, record: WorkloadRecord, stored: Question | None
) -> None:
    """Check a record's ``partition``; remember the groups of a partitioned new question.

    A partition is accepted only when the import creates the project's questions from scratch,
    or for a question already stored in that partition. Every record gives one, or none does.

    Raises:
        RecordError: records with and without a partition, a partition for a new question
            of a project that had questions, a partition other than the stored one, or a
            question sharing a group or source document with one in another partition.
    """
    given = record.partition is not None
    if state.with_partition is None:
        state.with_partition = (given, location)
    elif state.with_partition[0] != given:
        first = "gives" if state.with_partition[0] else "gives no"
        raise RecordError(
            location,
            "partition",
            f"the first record ({state.with_partition[1]}) {first} partition: give every "
            "record a partition, or none",
        )
    if not given:
        return
    if stored is not None:
        if stored.partition != record.partition:
            raise RecordError(
                location,
                "partition",
                f"question {echo(record.external_id)} is in partition {echo(stored.partition)} in "
                f"this project, not {echo(record.partition)}",
            )
        return
    if not state.fresh:
        raise RecordError(
            location,
            "partition",
            f"question {echo(record.external_id)} is new and gives a partition, but project "
            f"{state.project.slug!r} already had questions or a frozen split; partitions "
            "are imported only with all of a project's questions",
        )
    _check_partition_groups(state, location, record)
    state.partitioned += 1


def _check_partition_groups(state: ImportState, location: str, record: WorkloadRecord) -> None:
    """Refuse a new question that shares a group or a document with one in another partition.

    Raises:
        RecordError: naming the other question and its partition.
    """
    tokens = [("source document", s.id) for s in record.sources]
    if record.group_key:
        tokens.append(("group_key", record.group_key))
    for token in tokens:
        partition, other = state.partition_tokens.setdefault(
            token, (record.partition, record.external_id)
        )
        if partition != record.partition:
            raise RecordError(
                location,
                "partition",
                f"question {echo(record.external_id)} is in {echo(record.partition)} but shares "
                f"{token[0]} {echo(token[1])} with question {echo(other)} in {echo(partition)}; "
                "questions sharing a group_key or a source document are in one partition",
            )


def _stored_candidates(existing_ids: set[int]) -> dict[int, dict[str, tuple[int, str]]]:
    """Return ``{question id: {candidate key: (id, fingerprint)}}`` of stored questions."""
    stored: dict[int, dict[str, tuple[int, str]]] = defaultdict(dict)
    for pk, question_id, key, fp in CandidateAnswer.objects.filter(
        question_id__in=existing_ids
    ).values_list("pk", "question_id", "key", "fingerprint"):
        stored[question_id][key] = (pk, fp)
    return stored


def _check_stored_candidate(
    location: str,
    record: WorkloadRecord,
    position: int,
    candidate: CandidateIn,
    known: dict[str, tuple[int, str]],
    fp: str,
) -> int:
    """Return the id of a stored question's candidate, checking it is unchanged.

    Raises:
        RecordError: the candidate is new, or its content differs.
    """
    if candidate.id not in known:
        raise RecordError(
            location,
            f"candidates[{position}].id",
            f"candidate {echo(candidate.id)} is new but question {echo(record.external_id)} is "
            "already imported; a question's candidates are fixed at its first import",
        )
    pk, stored_fp = known[candidate.id]
    if stored_fp != fp:
        raise RecordError(
            location,
            f"candidates[{position}]",
            f"candidate {echo(candidate.id)} is already imported with different content (text, "
            "scores or claims); candidates are immutable",
        )
    return pk


def write_candidates(state: ImportState, chunk: Chunk, keys: ChunkKeys) -> None:
    """Create new questions' candidates, items and claims; check existing ones are unchanged.

    Fills ``keys.candidates`` for every candidate of the chunk, ``keys.items`` (reserved ids,
    written by :func:`write_items`) for the new ones and ``keys.claims`` for every claim of the
    chunk's questions.

    Raises:
        RecordError: a stored question's candidates differ (new, changed or missing ones).
    """
    stored = _stored_candidates(keys.existing_ids)
    new: list[tuple[int, CandidateIn]] = []
    rows: list[tuple[Any, ...]] = []
    for location, record in chunk:
        question_id = keys.questions[record.external_id]
        known = stored.get(question_id, {})
        ranks = frequency_ranks(record.candidates)
        for position, (candidate, rank) in enumerate(zip(record.candidates, ranks, strict=True)):
            index = position if candidate.sample_index is None else candidate.sample_index
            fp = fingerprint(_candidate_fields(candidate, index))
            if question_id in keys.existing_ids:
                keys.candidates[(question_id, candidate.id)] = _check_stored_candidate(
                    location, record, position, candidate, known, fp
                )
                continue
            new.append((question_id, candidate))
            rows.append(_candidate_row(question_id, candidate, index, rank, fp))
        if question_id in keys.existing_ids and len(known) != len(record.candidates):
            raise RecordError(
                location,
                "candidates",
                f"question {echo(record.external_id)} has {len(known)} stored candidates but "
                f"{len(record.candidates)} in this record",
            )
    candidate_ids = insert_rows(CandidateAnswer, CANDIDATE_COLUMNS, rows, with_ids=True)
    # The items are written by write_items, once the chunk's resolutions are known.
    keys.items = dict(zip(candidate_ids, reserve_ids(Item._meta.db_table, len(new)), strict=True))
    for pk, (question_id, candidate) in zip(candidate_ids, new, strict=True):
        keys.candidates[(question_id, candidate.id)] = pk
    new_claims = _write_claims(state, list(zip(candidate_ids, new, strict=True)))
    state.created["candidates"] += len(new)
    keys.claims = _claim_ids(new_claims, keys.existing_ids)


def write_items(state: ImportState, keys: ChunkKeys) -> None:
    """Create the items of the chunk's new candidates (``keys.items``), resolved or open.

    An item whose resolution the chunk imports (``keys.item_resolutions``) is written resolved
    at version 1, pointing at it; the others open at version 0.
    """
    now = db_datetime(timezone.now())
    opened = (ItemStatus.OPEN.value, None, 0)
    insert_rows(
        Item,
        ITEM_COLUMNS,
        [
            (
                item_id,
                state.project.pk,
                candidate_id,
                now,
                *keys.item_resolutions.get(item_id, opened),
            )
            for candidate_id, item_id in keys.items.items()
        ],
    )
    state.created["items"] += len(keys.items)


def _claim_rows(
    state: ImportState, pk: int, text: str, claims: list[ClaimIn]
) -> list[tuple[Any, ...]]:
    """Return the ``CLAIM_COLUMNS`` rows of a new candidate's claims, locating unplaced ones."""
    rows: list[tuple[Any, ...]] = []
    after = 0
    for index, claim in enumerate(claims):
        start, end = claim.start, claim.end
        if start is None and not claim.unanchored:
            start = locate_claim(text, claim.text, after)
            end = None if start is None else start + len(claim.text)
        if start is not None and end is not None:
            after = end
        else:
            state.created["unanchored_claims"] += 1
        rows.append((pk, index, claim.text, start, end, start is None, claim.machine_split))
    return rows


def _write_claims(
    state: ImportState, new: list[tuple[int, tuple[int, CandidateIn]]]
) -> dict[tuple[int, int], int]:
    """Create the claims of new candidates; return ``{(candidate id, index): claim id}``."""
    claim_rows: list[tuple[Any, ...]] = []
    for pk, (_, candidate) in new:
        claim_rows += _claim_rows(state, pk, candidate.text, candidate.claims)
    claim_ids = insert_rows(Claim, CLAIM_COLUMNS, claim_rows, with_ids=True)
    state.created["claims"] += len(claim_rows)
    return {(row[0], row[1]): pk for row, pk in zip(claim_rows, claim_ids, strict=True)}


def _claim_ids(
    new_claim_ids: dict[tuple[int, int], int], existing_ids: set[int]
) -> dict[tuple[int, int], int]:
    """Add the claims of questions imported before to the claims just created."""
    claim_ids = dict(new_claim_ids)
    if existing_ids:
        for candidate_id, index, pk in Claim.objects.filter(
            candidate__question_id__in=existing_ids
        ).values_list("candidate_id", "index", "pk"):
            claim_ids[(candidate_id, index)] = pk
    return claim_ids
