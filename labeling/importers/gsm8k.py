"""Adapter for GSM8K example model solutions (openai/grade-school-math JSONL).

One JSON object per line: a GSM8K test question, its reference solution, and four sampled
solutions (GPT-3 6B / 175B, finetuning / verification) each with upstream's ``is_correct``.
This module maps each line to one native record (``schema.py``):

- **question**: ``question`` exactly; ``external_id`` ``gsm8k:`` + the first 16 hex digits of
  sha256(question); metadata keeps the reference solution and its extracted answer. No sources:
  the evidence relation is external truth.
- **candidates**: the four solutions in the fixed order of :data:`GENERATORS` (sample index
  0-3), generator = the key, canonical form = :func:`extract_answer`. The importer ranks the
  canonical forms by frequency (K = 4).
- **prior annotation**: origin ``automatic``, annotator ``gsm8k-is-correct``: ``is_correct`` is
  upstream's exact-match check against the reference answer, not a human label.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import IO, Any

from labeling.importers.base import RecordSource, SourcedRecord, WorkloadFormat
from labeling.importers.native import convert_jsonl
from labeling.importers.record_errors import RecordError, echo
from labeling.vocabulary import ADMISSIBLE, INADMISSIBLE

GENERATORS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")
ANNOTATOR = "gsm8k-is-correct"

# The dataset part of the guideline of this format's policy preset (Markdown; the rest,
# explaining every label, is written by labeling.policy_presets).
DATA_NOTES = """\
Each item is one sampled chain-of-thought solution; judge whether its final answer is the true
answer to the question (no sources: external truth).

Canonical form (the final answer) of a solution: the text after "A:" on the last line that
starts with "A:", with every "," and "$" removed and surrounding whitespace stripped. A solution
without such a line (truncated at the length limit) has no canonical form ("no answer"); it is
never counted as any answer. Frequency ranks are computed from canonical forms over the 4
samples of a question.

The imported prior labels (annotator "gsm8k-is-correct", origin automatic) are upstream's
is_correct flag, an exact-match check of the final answer against the reference: admissible when
true, inadmissible when false. They are not human labels.
"""


def extract_answer(solution: str) -> str | None:
    r"""Return the canonical final answer of a GSM8K-style solution, or None for "no answer".

    Rule: take the last line (split on ``"\n"``) that starts with ``"A:"``; keep what follows
    ``"A:"``; remove every ``","`` and ``"$"``; strip surrounding whitespace. ``"A: 90,000"``
    gives ``"90000"``, ``"A: -129025"`` gives ``"-129025"``. None when no line starts with
    ``"A:"`` (a truncated sample) or nothing is left.
    """
    answer = None
    for line in solution.split("\n"):
        if line.startswith("A:"):
            answer = line[2:]
    if answer is None:
        return None
    canonical = answer.replace(",", "").replace("$", "").strip()
    return canonical or None


def _new_counters() -> dict[str, Any]:
    return {
        "records": 0,
        "solutions": 0,
        "no_answer": 0,
        "thousands_separators_removed": 0,
        "dollar_signs_removed": 0,
        "negative_answers": 0,
        "is_correct_true": 0,
        "is_correct_differs_from_exact_match": 0,
    }


def _record(obj: dict[str, Any], where: str, counters: dict[str, Any]) -> dict[str, Any]:
    """Map one parsed line; raises RecordError naming the field in the wrong shape."""
    for key in ("question", "ground_truth"):
        if not isinstance(obj.get(key), str):
            got = "missing" if key not in obj else type(obj[key]).__name__
            raise RecordError(where, key, f"expected str, got {got}")
    question: str = obj["question"]
    reference = extract_answer(obj["ground_truth"])
    candidates = []
    for index, generator in enumerate(GENERATORS):
        sample = obj.get(generator)
        if not isinstance(sample, dict):
            got = "missing" if generator not in obj else type(sample).__name__
            raise RecordError(where, generator, f"expected an object, got {got}")
        solution = sample.get("solution")
        if not isinstance(solution, str):
            raise RecordError(
                where, f"{generator}.solution", f"expected str, got {type(solution).__name__}"
            )
        is_correct = sample.get("is_correct")
        if not isinstance(is_correct, bool):
            raise RecordError(
                where, f"{generator}.is_correct", f"expected true or false, got {echo(is_correct)}"
            )
        canonical = extract_answer(solution)
        _count(solution, canonical, is_correct, reference, counters)
        candidates.append(
            {
                "id": generator,
                "text": solution,
                "generator": generator,
                "sample_index": index,
                "canonical_form": canonical,
                "prior_annotations": [
                    {
                        "annotator": ANNOTATOR,
                        "origin": "automatic",
                        "answer_label": ADMISSIBLE if is_correct else INADMISSIBLE,
                        "raw": {"is_correct": is_correct},
                    }
                ],
            }
        )
    counters["records"] += 1
    return {
        "external_id": f"gsm8k:{hashlib.sha256(question.encode('utf-8')).hexdigest()[:16]}",
        "text": question,
        "metadata": {
            "dataset": "gsm8k",
            "ground_truth": obj["ground_truth"],
            "ground_truth_answer": reference,
        },
        "candidates": candidates,
    }


def _count(
    solution: str,
    canonical: str | None,
    is_correct: bool,
    reference: str | None,
    counters: dict[str, Any],
) -> None:
    counters["solutions"] += 1
    counters["is_correct_true"] += is_correct
    if canonical is None:
        counters["no_answer"] += 1
    else:
        last = [line for line in solution.split("\n") if line.startswith("A:")][-1]
        counters["thousands_separators_removed"] += "," in last
        counters["dollar_signs_removed"] += "$" in last
        counters["negative_answers"] += canonical.startswith("-")
    matches = canonical is not None and canonical == reference
    counters["is_correct_differs_from_exact_match"] += matches != is_correct


def read_gsm8k(stream: IO[bytes], counters: dict[str, Any]) -> Iterator[SourcedRecord]:
    """Yield ``("line N", native record or RecordError)`` for each line of the JSONL file.

    ``counters`` is filled with the quirks met (see README).
    A line in the wrong shape (not JSON, a missing generator key, a non-boolean ``is_correct``)
    yields a RecordError naming the field, e.g. ``175b_verification.is_correct``.
    """
    yield from convert_jsonl(stream, lambda obj, location: _record(obj, location, counters))


def open_gsm8k(stream: IO[bytes], filename: str) -> RecordSource:
    """Open a GSM8K model-solutions JSONL file for :func:`labeling.services.workload_import`."""
    counters = _new_counters()
    return RecordSource(read_gsm8k(stream, counters), counters)


FORMAT = WorkloadFormat(
    "gsm8k",
    "GSM8K example model solutions (example_model_solutions.jsonl): one question per line, 4 "
    "sampled solutions as candidates with extracted final answers, upstream's is_correct",
    open_gsm8k,
    "gsm8k",
)
