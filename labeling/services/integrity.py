"""Integrity audit of pinned source texts."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

from labeling.models import Project, SourceVersion

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class IntegrityReport:
    """How many source versions were checked, and the ids whose text no longer matches its pin."""

    checked: int
    mismatched: list[int]


def source_versions_verify(*, project: Project) -> IntegrityReport:
    """Recompute the sha256 and length of every source version of ``project``.

    A mismatch means a text was changed behind the application's back (the database refuses
    updates, so only a direct restore or a trigger removal can cause it). Reads only; streams
    versions with ``iterator()`` so memory stays flat.
    """
    checked = 0
    mismatched: list[int] = []
    versions = SourceVersion.objects.filter(document__project=project).order_by("pk")
    for pk, text, sha, length in versions.values_list("pk", "text", "sha256", "length").iterator(
        chunk_size=500
    ):
        checked += 1
        if hashlib.sha256(text.encode("utf-8")).hexdigest() != sha or len(text) != length:
            mismatched.append(pk)
    if mismatched:
        logger.error(
            "source_versions_verify.mismatch",
            extra={"project": project.slug, "versions": mismatched[:50]},
        )
    return IntegrityReport(checked=checked, mismatched=mismatched)
