"""Claim splitting at import, for formats whose answers come without claims.

An import of such a format chooses how each answer becomes claims (``--claims`` on the command
line, the *Claims* field of the upload page, the ``claims`` field of the API):

- ``sentences`` (the default): the answer's sentences from pysbd (English rules, the text never
  cleaned), each trimmed of surrounding whitespace by moving its offsets; ``machine_split``.
- ``whole``: one claim per answer, the whole answer trimmed of surrounding whitespace.

Either way the claims carry explicit offsets: code points of the answer exactly as stored
(``answer[start:end] == claim``), never of a normalised or cleaned copy. A whitespace-only or
empty answer has no claims. The choice and what it produced are recorded in the import batch's
report (``notes.claim_splitting``, see :attr:`ClaimSplitter.counts`).
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import pysbd

SENTENCES = "sentences"
WHOLE = "whole"
#: The choices, the default first, with what each does (shown by the command and the page).
CLAIM_MODES = {
    SENTENCES: "one claim per sentence (pysbd, English)",
    WHOLE: "one claim per answer (the whole answer)",
}


def split_sentences(text: str, segmenter: pysbd.Segmenter) -> tuple[list[tuple[int, int]], int]:
    """Split ``text`` into sentence spans without altering it.

    ``segmenter`` is ``pysbd.Segmenter(language="en", clean=False, char_span=True)``, not
    thread-safe (one per import). Returns ``(spans, filled)``: spans are ``(start, end)``
    code-point offsets, ordered and disjoint, trimmed of surrounding whitespace by moving the
    offsets; whitespace-only segments are skipped. pysbd's spans are used only when
    ``text[start:end]`` equals the sentence it returned and they do not overlap; non-whitespace
    text they leave uncovered becomes a span of its own, counted by ``filled``.
    """
    spans: list[tuple[int, int]] = []
    position = 0
    for segment in segmenter.segment(text):
        if segment.start < position or text[segment.start : segment.end] != segment.sent:
            continue
        spans.append((segment.start, segment.end))
        position = segment.end
    covered: list[tuple[int, int]] = []
    filled = 0
    position = 0
    for start, end in [*spans, (len(text), len(text))]:
        if start > position:
            gap = trim(text, position, start)
            if gap is not None:
                covered.append(gap)
                filled += 1
        trimmed = trim(text, start, end)
        if trimmed is not None:
            covered.append(trimmed)
        position = end
    return covered, filled


def trim(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Return ``(start, end)`` moved inwards past whitespace, or None if nothing else is left."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if end > start else None


class ClaimSplitter:
    """Turns answers into native claims by one import's choice, counting what it did.

    One per import (pysbd's segmenter is not thread-safe). ``counts`` is the dict recorded in
    the batch report: ``mode``, ``splitter`` (``"pysbd 0.3.4 (en)"`` for sentences, ``"none"``
    for whole), ``answers`` split, ``claims`` made, ``answers_without_claims`` (empty or
    whitespace-only answers) and ``sentence_gaps_filled`` (text pysbd left uncovered, made a
    claim of its own).
    """

    def __init__(self, mode: str = SENTENCES) -> None:
        """Choose the mode (a key of :data:`CLAIM_MODES`).

        Raises:
            ValueError: an unknown mode.
        """
        if mode not in CLAIM_MODES:
            raise ValueError(f"unknown claim splitting {mode!r}; one of {list(CLAIM_MODES)}")
        self.mode = mode
        self._segmenter: pysbd.Segmenter | None = None
        self.counts: dict[str, Any] = {
            "mode": mode,
            "splitter": f"pysbd {version('pysbd')} (en)" if mode == SENTENCES else "none",
            "answers": 0,
            "claims": 0,
            "answers_without_claims": 0,
            "sentence_gaps_filled": 0,
        }

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Return the claims of ``text`` as ordered, disjoint code-point ``(start, end)`` spans."""
        if self.mode == WHOLE:
            whole = trim(text, 0, len(text))
            return [] if whole is None else [whole]
        if self._segmenter is None:
            self._segmenter = pysbd.Segmenter(language="en", clean=False, char_span=True)
        spans, filled = split_sentences(text, self._segmenter)
        self.counts["sentence_gaps_filled"] += filled
        return spans

    def claims(self, text: str) -> list[dict[str, Any]]:
        """Return one answer's native claims; ``machine_split`` is true for sentences only."""
        spans = self.spans(text)
        self.counts["answers"] += 1
        self.counts["claims"] += len(spans)
        self.counts["answers_without_claims"] += not spans
        split = self.mode == SENTENCES
        return [
            {"text": text[start:end], "start": start, "end": end, "machine_split": split}
            for start, end in spans
        ]
