"""Writing source documents, their pinned versions and the questions' retrieval links.

A source is matched on its document key and the sha256 of its text: known text is reused, new
text becomes a new version of its document. A version's metadata is pinned with its text, and a
given ``version`` number must be the text's number among its document's versions.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from labeling.bulk import ids_by_key, insert_rows
from labeling.importers.record_errors import RecordError, echo
from labeling.importers.schema import SourceIn, SourceVersionIn
from labeling.models import RetrievalLink, SourceDocument, SourceVersion
from labeling.rows import db_datetime
from labeling.services.imports.common import text_sha256
from labeling.services.imports.state import Chunk, ChunkKeys, ImportState

# A version's metadata is pinned with its text: a re-import may not silently change it.
PINNED_SOURCE_FIELDS = ("uri", "published_at", "observed_at")
VERSION_COLUMNS = (
    "document_id",
    "text",
    "sha256",
    "length",
    "uri",
    "published_at",
    "observed_at",
    "import_batch_id",
    "created_at",
)


@dataclass(frozen=True)
class SourceEntry:
    """A source met in the input: where (location and field path), the source and its sha256."""

    location: str
    path: str  # "sources[2]" in a record, "" for a source version given on its own
    source: SourceIn | SourceVersionIn
    sha256: str

    @property
    def key(self) -> tuple[str, str]:
        """The natural key of the version: (document key, sha256)."""
        return (self.source.id, self.sha256)

    def field(self, name: str) -> str:
        """Return the field path of the source's field ``name``."""
        return f"{self.path}.{name}" if self.path else name


def record_sources(chunk: Chunk) -> list[SourceEntry]:
    """Return the sources of the chunk's records, in order."""
    return [
        SourceEntry(location, f"sources[{s}]", source, text_sha256(source.text))
        for location, record in chunk
        for s, source in enumerate(record.sources)
    ]


def preamble_sources(chunk: list[tuple[str, SourceVersionIn]]) -> list[SourceEntry]:
    """Return source versions given on their own (a preamble) as entries."""
    return [SourceEntry(loc, "", source, text_sha256(source.text)) for loc, source in chunk]


def _check_pinned_metadata(
    entries: list[SourceEntry], pinned: dict[tuple[str, str], tuple[Any, ...]]
) -> None:
    """Refuse a source whose text is known (stored, or earlier in the chunk) with other metadata.

    Raises:
        RecordError: naming the source field that differs.
    """
    for entry in entries:
        source = entry.source
        given = tuple(getattr(source, name) for name in PINNED_SOURCE_FIELDS)
        known = pinned.setdefault(entry.key, given)
        for name, old, new in zip(PINNED_SOURCE_FIELDS, known, given, strict=True):
            if old != new:
                raise RecordError(
                    entry.location,
                    entry.field(name),
                    f"source {echo(source.id)} with this text was imported with a different "
                    f"{name}; a version's metadata is pinned with its text",
                )


def _documents(state: ImportState, uris: dict[str, str]) -> tuple[dict[str, int], list[int]]:
    """Return ``{document key: id}`` (creating missing documents) and the ids stored before."""
    docs = ids_by_key(SourceDocument, "key", list(uris), project_id=state.project.pk)
    stored = list(docs.values())
    new_docs = [(state.project.pk, k, u) for k, u in uris.items() if k not in docs]
    doc_ids = insert_rows(SourceDocument, ("project_id", "key", "uri"), new_docs, with_ids=True)
    state.created["source_documents"] += len(new_docs)
    docs.update({key: pk for (_, key, _), pk in zip(new_docs, doc_ids, strict=True)})
    state.document_ids.update(docs)
    return docs, stored


def write_source_versions(
    state: ImportState, entries: list[SourceEntry]
) -> dict[tuple[str, str], int]:
    """Return {(document key, sha256): version id}, creating missing documents and versions.

    Versions are created in the order of ``entries``; a given ``version`` number is checked
    against the text's number among its document's versions (by creation order).

    Raises:
        RecordError: a version's metadata differs from the stored one, or its ``version``
            number is not the number it has in the project.
    """
    wanted: dict[tuple[str, str], SourceIn | SourceVersionIn] = {}
    uris: dict[str, str] = {}
    for entry in entries:
        wanted.setdefault(entry.key, entry.source)
        uris.setdefault(entry.source.id, entry.source.uri)
    if not wanted:
        return {}
    docs, stored = _documents(state, uris)
    by_doc_id = {docs[k]: k for k in uris}
    versions: dict[tuple[str, str], int] = {}
    pinned: dict[tuple[str, str], tuple[Any, ...]] = {}
    for doc_id, sha, pk, *meta in SourceVersion.objects.filter(
        document_id__in=stored, sha256__in={sha for _, sha in wanted}
    ).values_list("document_id", "sha256", "pk", *PINNED_SOURCE_FIELDS):
        versions[(by_doc_id[doc_id], sha)] = pk
        pinned[(by_doc_id[doc_id], sha)] = tuple(meta)
    _check_pinned_metadata(entries, pinned)
    missing = [(k, source) for k, source in wanted.items() if k not in versions]
    now = db_datetime(timezone.now())
    rows = [
        (
            docs[key],
            source.text,
            sha,
            len(source.text),
            source.uri,
            db_datetime(source.published_at),
            db_datetime(source.observed_at),
            state.batch.pk,
            now,
        )
        for (key, sha), source in missing
    ]
    version_ids = insert_rows(SourceVersion, VERSION_COLUMNS, rows, with_ids=True)
    state.created["source_versions"] += len(missing)
    versions.update({k: pk for (k, _), pk in zip(missing, version_ids, strict=True)})
    _check_version_numbers(state, entries)
    return versions


def _check_version_numbers(state: ImportState, entries: list[SourceEntry]) -> None:
    """Refuse a source whose given ``version`` is not its number among its document's texts.

    A document's versions are numbered 1, 2, ... in creation (primary key) order, as a
    release numbers them.

    Raises:
        RecordError: naming the source's ``version`` field.
    """
    numbered = [e for e in entries if e.source.version is not None]
    if not numbered:
        return
    documents = {state.document_ids[e.source.id] for e in numbered}
    numbers: dict[tuple[int, str], int] = {}
    count: Counter[int] = Counter()
    for document_id, sha in (
        SourceVersion.objects.filter(document_id__in=documents)
        .order_by("document_id", "pk")
        .values_list("document_id", "sha256")
    ):
        count[document_id] += 1
        numbers[(document_id, sha)] = count[document_id]
    for entry in numbered:
        number = numbers[(state.document_ids[entry.source.id], entry.sha256)]
        if number != entry.source.version:
            raise RecordError(
                entry.location,
                entry.field("version"),
                f"source {echo(entry.source.id)} with this text is version {number} of its "
                f"document in this project, not {entry.source.version} (the project holds "
                "other versions of it, or they were given out of order)",
            )


def _stored_links(
    existing_ids: set[int],
) -> tuple[dict[tuple[int, int], tuple[Any, Any]], dict[int, set[int]]]:
    """Return the stored links of questions imported before, and the documents each cites."""
    linked: dict[tuple[int, int], tuple[Any, Any]] = {}
    cited: dict[int, set[int]] = defaultdict(set)
    for question_id, version_id, document_id, rank, score in RetrievalLink.objects.filter(
        question_id__in=existing_ids
    ).values_list(
        "question_id", "source_version_id", "source_version__document_id", "rank", "score"
    ):
        linked[(question_id, version_id)] = (rank, score)
        cited[question_id].add(document_id)
    return linked, cited


def write_links(state: ImportState, chunk: Chunk, keys: ChunkKeys) -> None:
    """Link questions to their source versions.

    After the partition freeze, an imported question may gain a new version of a document it
    already cites, never a new document: that could join groups across partitions.

    Raises:
        RecordError: a stored link with another rank or score, or a new document for a
            question imported before the freeze.
    """
    linked, cited = _stored_links(keys.existing_ids)
    frozen = state.project.partition_frozen_at is not None
    links = []
    for location, record in chunk:
        question_id = keys.questions[record.external_id]
        version_ids = keys.sources(record)
        for s, source in enumerate(record.sources):
            version_id = version_ids[source.id]
            if (question_id, version_id) in linked:
                if linked[(question_id, version_id)] != (source.rank, source.score):
                    raise RecordError(
                        location,
                        f"sources[{s}]",
                        f"question {echo(record.external_id)} was linked to source "
                        f"{echo(source.id)} with a different rank or score",
                    )
                continue
            if (
                frozen
                and question_id in keys.existing_ids
                and state.document_ids[source.id] not in cited[question_id]
            ):
                raise RecordError(
                    location,
                    f"sources[{s}].id",
                    f"question {echo(record.external_id)} would "
                    f"gain source {echo(source.id)}, which "
                    "it did not cite when the partition was frozen; a new source could join "
                    "groups across partitions",
                )
            linked[(question_id, version_id)] = (source.rank, source.score)
            links.append((question_id, version_id, source.rank, source.score))
    insert_rows(RetrievalLink, ("question_id", "source_version_id", "rank", "score"), links)
    state.created["retrieval_links"] += len(links)
