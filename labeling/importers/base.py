"""What every workload format is made of: a record source, the import's options, the format.

The adapters (``faithbench.py``, ``ragas.py``, ...) import these; the registry of formats
(:func:`labeling.importers.formats`) imports the adapters, and no adapter imports it back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from labeling.importers.claims import ClaimSplitter
from labeling.importers.record_errors import RecordError

# A record as a format yields it: where it came from ("line 12", "batch_3.json sample 5") and
# either the parsed JSON object or the error that prevented parsing it.
SourcedRecord = tuple[str, dict[str, Any] | RecordError]


class RecordSource:
    """The records of one file plus the adapter's counters (quirks met, declared rules applied).

    A format that carries more than records (a certified release) also sets
    ``source_versions``, ``policies`` and ``partition`` (``(location, object)`` pairs, as
    :func:`labeling.services.workload_import` takes them) and ``digest``, the sha256 that
    identifies the input instead of the file's bytes (a release: its manifest's, so its zip and
    its directory are one import).

    :meth:`close` releases what the reader holds (temporary files); the import service calls
    it when the import ends, however it ends.
    """

    def __init__(
        self,
        records: Iterator[SourcedRecord],
        counters: dict[str, Any] | None = None,
        *,
        source_versions: Iterable[SourcedRecord] | None = None,
        policies: list[SourcedRecord] | None = None,
        partition: SourcedRecord | None = None,
        digest: str | None = None,
        cleanup: Callable[[], None] | None = None,
    ) -> None:
        """Wrap ``records``; ``counters`` is the dict the reader fills while it is iterated."""
        self._records = records
        self.counters: dict[str, Any] = {} if counters is None else counters
        self.source_versions = source_versions
        self.policies = policies
        self.partition = partition
        self.digest = digest
        self._cleanup = cleanup

    def __iter__(self) -> Iterator[SourcedRecord]:
        return self._records

    def notes(self) -> dict[str, Any]:
        """Return the counters gathered while the records were read."""
        return dict(sorted(self.counters.items()))

    def close(self) -> None:
        """Release what the reader holds (e.g. a release's extracted files); idempotent."""
        cleanup, self._cleanup = self._cleanup, None
        if cleanup is not None:
            cleanup()


@dataclass(frozen=True)
class ImportOptions:
    """What one import chose for a format that reads with options (``open_with_options``).

    ``splitter``: the claim splitting of answers that come without claims. ``evaluator_version``:
    the version of the evaluator whose scores the file carries (a RAGAS table's score columns),
    or None when not declared.
    """

    splitter: ClaimSplitter = field(default_factory=ClaimSplitter)
    evaluator_version: str | None = None


@dataclass(frozen=True)
class WorkloadFormat:
    """A readable input format: its name, what it reads, and the policy it implies.

    ``open(stream, filename)`` reads a file; ``open_directory(path)``, when set, reads a
    directory (a release). A format whose answers come without claims sets
    ``open_with_options(stream, filename, options)`` and, if it reads directories,
    ``open_directory_with_options(path, options)``: the import reads it with the choices it
    made (:class:`ImportOptions`: the claim splitting, the evaluator version), and ``open``
    reads it with the defaults (sentences, no version). ``evaluator_scores`` says that its
    files carry evaluator scores whose version the import declares. ``policy_preset`` names
    the preset
    (``labeling.policy_presets``) of the label policy a project created for the format starts
    with; a format whose files carry their own policies sets ``RecordSource.policies``, which
    replace it.
    """

    name: str
    description: str
    open: Callable[[IO[bytes], str], RecordSource]
    policy_preset: str = "source_relative"
    open_directory: Callable[[Path], RecordSource] | None = None
    open_with_options: Callable[[IO[bytes], str, ImportOptions], RecordSource] | None = None
    open_directory_with_options: Callable[[Path, ImportOptions], RecordSource] | None = None
    evaluator_scores: bool = False

    @property
    def splits_claims(self) -> bool:
        """Whether the format's answers come without claims (the import chooses the splitting)."""
        return self.open_with_options is not None

    @property
    def reads_directories(self) -> bool:
        """Whether the format reads a directory (a release, a datasets folder)."""
        return self.open_directory is not None or self.open_directory_with_options is not None
