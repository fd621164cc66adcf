"""Workload formats: the native JSONL reader and adapters for public datasets.

Each format turns a file into native records (see ``schema.py``) that one service,
``labeling.services.workload_import``, validates and writes. An adapter never writes rows itself.
This package's module is the registry of formats (:func:`formats`); the adapters build on
``base.py`` and never import it back.
"""

from __future__ import annotations

from typing import IO

from labeling.importers.base import ImportOptions, RecordSource, SourcedRecord, WorkloadFormat
from labeling.importers.claims import CLAIM_MODES
from labeling.importers.native import read_jsonl

__all__ = [
    "ImportOptions",
    "RecordSource",
    "SourcedRecord",
    "WorkloadFormat",
    "claims_choice_error",
    "evaluator_version_error",
    "formats",
]


def claims_choice_error(format_name: str, claims: str | None) -> str | None:
    """Return why ``claims`` cannot be the claim splitting of an import in ``format_name``.

    None when it can: no choice (None), or a known choice for a format whose answers come
    without claims (:attr:`WorkloadFormat.splits_claims`). An unknown format is left to the
    caller.
    """
    if claims is None:
        return None
    if claims not in CLAIM_MODES:
        return f"unknown claim splitting {claims[:40]!r}; one of {list(CLAIM_MODES)}"
    known = formats()
    if format_name in known and not known[format_name].splits_claims:
        splitting = sorted(name for name, f in known.items() if f.splits_claims)
        return (
            f"the {format_name} format gives its own claims; claim splitting applies to the "
            f"formats whose answers come without claims ({', '.join(splitting)})"
        )
    return None


def evaluator_version_error(format_name: str, version: str | None) -> str | None:
    """Return why ``version`` cannot be the declared evaluator version of an import.

    None when it can: none declared, or 1 to 255 characters for a format whose files carry
    evaluator scores (:attr:`WorkloadFormat.evaluator_scores`). An unknown format is left to
    the caller.
    """
    if version is None:
        return None
    if not 0 < len(version) <= 255:
        return "give 1 to 255 characters"
    known = formats()
    if format_name in known and not known[format_name].evaluator_scores:
        scored = sorted(name for name, f in known.items() if f.evaluator_scores)
        return (
            f"the {format_name} format carries no evaluator scores to version; the evaluator "
            f"version applies to {', '.join(scored)}"
        )
    return None


def _native(stream: IO[bytes], filename: str) -> RecordSource:
    return RecordSource(read_jsonl(stream))


def formats() -> dict[str, WorkloadFormat]:
    """Return every known format by name."""
    from labeling.importers import (
        expertqa,
        faithbench,
        gsm8k,
        otel,
        ragas,
        ragtruth,
        release,
        wice,
        xsum,
    )

    return {
        "native": WorkloadFormat(
            "native",
            "certlabel JSONL, one question per line",
            _native,
        ),
        "faithbench": faithbench.FORMAT,
        "expertqa": expertqa.FORMAT,
        "gsm8k": gsm8k.FORMAT,
        "otel": otel.FORMAT,
        "ragas": ragas.FORMAT,
        "ragtruth": ragtruth.FORMAT,
        "release": release.FORMAT,
        "wice": wice.FORMAT,
        "xsum": xsum.FORMAT,
    }
