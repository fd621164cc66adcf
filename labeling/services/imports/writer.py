"""Writing validated records chunk by chunk, table group after table group.

One chunk is written in this order: its sources (documents and versions), its questions, their
retrieval links, candidates (with claims), evaluator labels, prior annotations, the new
candidates' items, resolutions and gold references. The resolutions are checked and given ids
before the items are written, so an item the chunk resolves is written resolved (foreign keys are
checked at commit: a row may name one written after it). Every step either writes its rows or
raises a :class:`RecordError`; the caller's transaction then rolls the whole import back.
"""

from __future__ import annotations

from labeling.importers.schema import SourceVersionIn
from labeling.services.imports.evaluators import write_evaluator_labels
from labeling.services.imports.gold import write_gold
from labeling.services.imports.priors import write_prior_annotations
from labeling.services.imports.questions import write_candidates, write_items, write_questions
from labeling.services.imports.resolutions import prepare_resolutions, write_resolutions
from labeling.services.imports.sources import (
    preamble_sources,
    record_sources,
    write_links,
    write_source_versions,
)
from labeling.services.imports.state import Chunk, ChunkKeys, ImportState


class ImportWriter(ImportState):
    """Writes validated records chunk by chunk inside the caller's transaction."""

    def write_source_versions(self, chunk: list[tuple[str, SourceVersionIn]]) -> None:
        """Write source versions given on their own (a preamble), in order.

        Raises:
            RecordError: a version's metadata differs from the stored one, or its ``version``
                number is not the number it has in the project.
        """
        write_source_versions(self, preamble_sources(chunk))

    def write(self, chunk: Chunk) -> None:
        """Write one chunk of validated records.

        Raises:
            RecordError: a record conflicts with what is stored (changed question or candidate,
                changed evaluator label or prior annotation, new question after the freeze).
        """
        sources = record_sources(chunk)
        keys = ChunkKeys(versions=write_source_versions(self, sources))
        keys.remember_sources(chunk, [entry.key for entry in sources])
        write_questions(self, chunk, keys)
        write_links(self, chunk, keys)
        write_candidates(self, chunk, keys)
        write_evaluator_labels(self, chunk, keys)
        write_prior_annotations(self, chunk, keys)
        resolutions = prepare_resolutions(self, chunk, keys)
        write_items(self, keys)
        write_resolutions(self, keys, resolutions)
        write_gold(self, chunk, keys)
