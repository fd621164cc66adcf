"""The XSum hallucination annotations (google-research-datasets/xsum_hallucination_annotations).

Refused, whatever the file: the annotations judge each summary against its BBC article, and the
articles are not distributed with them (only their ``bbcid``). Every label here is pinned to
the source text it was judged against; without the article there is nothing to pin, and the
summary cannot stand in for it: it contains every span the workers flagged as not supported by
the article, so it would "support" them all. The worker ids (``wid_0``..``wid_2``) also name a
position on each summary, not a person, so they cannot be pseudonymous annotators.

The format is listed so that choosing it says why; the data can be imported as native records
once each ``bbcid`` is joined with its XSum article (docs/adapters.md, "XSum").
"""

from __future__ import annotations

from typing import IO

from labeling.importers.base import RecordSource, WorkloadFormat
from labeling.importers.record_errors import RecordError

REFUSAL = (
    "XSum hallucination annotations cannot be imported as they are: the summaries were judged "
    "against BBC articles that are not distributed with them (only the bbcid), so no label can "
    "be pinned to the text it was judged against. The summary is no substitute source: it "
    "contains every span the workers flagged as unsupported. Join each bbcid with its XSum "
    "article and import native records instead."
)


def open_xsum(stream: IO[bytes], filename: str) -> RecordSource:
    """Refuse the file: one RecordError saying why (see the module docstring)."""
    return RecordSource(iter([(filename, RecordError(filename, "(file)", REFUSAL))]))


FORMAT = WorkloadFormat(
    "xsum",
    "XSum hallucination annotations (refused: the BBC articles they judge are not distributed)",
    open_xsum,
)
