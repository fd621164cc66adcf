"""Content fingerprints: the sha256 of canonical JSON, and of a text (a source version's pin).

Imported by the import service (``labeling.services.imports``) and the labelling services alike;
imports nothing of the project.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def fingerprint(value: Any) -> str:
    """Return the sha256 of the canonical JSON of ``value`` (sorted keys, no spaces, UTF-8).

    Numbers compare by value because the parser reads integral numbers as ints
    (``labeling.importers.native.loads_strict``): ``2`` and ``2.0`` give one fingerprint.
    """
    data = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def text_sha256(text: str) -> str:
    """Return the hex sha256 of the UTF-8 encoding of ``text`` (the pin of a source version)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
