"""``manage.py verify_release PATH``: check a release directory or zip against its manifest.

Recomputes every file's sha256 and size and every count of the manifest (from labels.jsonl and
sources.jsonl) and prints OK with the counts, or lists every difference on stderr and exits 1.
A zip (``release.zip`` or a download) is first extracted into a temporary directory by
``labeling.release_verify.extract_release_zip`` (the importer's own check): only the manifest
and the files it lists, each no larger than the manifest says. ``--sha256`` also compares the
manifest's hash with the one the release page shows, which catches a consistent forgery.
"""

from __future__ import annotations

import tempfile
import zipfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.release_format import MANIFEST, ReleaseFormatError, sha256_file
from labeling.release_verify import extract_release_zip, verify_release
from labeling.vocabulary import ADJUDICATED, CONSENSUS, PENDING, UNRESOLVED

# The counts printed after OK, in this order.
SUMMARY = (
    "items",
    "resolved",
    CONSENSUS,
    ADJUDICATED,
    UNRESOLVED,
    PENDING,
    "claims",
    "annotations",
    "evaluator_labels",
)


def summary_lines(manifest: dict[str, Any]) -> list[str]:
    """The OK report: release identity, files checked and the overall counts."""
    project = (manifest.get("project") or {}).get("slug", "?")
    release = (manifest.get("release") or {}).get("version", "?")
    counts = manifest.get("counts") or {}
    overall = counts.get("overall") or {}
    shown = []
    for key in SUMMARY:
        cell = overall.get(key) or {}
        text = f"{key} {cell.get('count')}"
        if cell.get("denominator") is not None:
            text += f"/{cell['denominator']}"
        shown.append(text)
    lines = [
        f"OK: release {release} of {project} (schema {manifest.get('schema_version')}): "
        f"{len(manifest.get('files') or [])} files match their sha256 and size; every count "
        "matches labels.jsonl and sources.jsonl",
        "  " + ", ".join(shown) + f", sources {counts.get('sources')}",
    ]
    for name, block in sorted((counts.get("per_partition") or {}).items()):
        items = (block.get("items") or {}).get("count")
        resolved = (block.get("resolved") or {}).get("count")
        lines.append(f"  partition {name}: items {items}, resolved {resolved}")
    return lines


class Command(BaseCommand):
    """Verify a release against its manifest: every hash, size and count."""

    help = (
        "Verify a release (a directory or a zip): recompute every file's sha256 and size and "
        "every count of the manifest. Exits 1 listing every difference."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="a release directory or its zip")
        parser.add_argument(
            "--sha256",
            help="the manifest's sha256 as the release page shows it: also fail unless equal",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["path"]
        if not path.exists():
            raise CommandError(f"{path}: no such file or directory")
        try:
            if path.is_dir():
                manifest = verify_release(path)
                manifest_sha256 = sha256_file(path / MANIFEST)[0]
            elif zipfile.is_zipfile(path):
                with tempfile.TemporaryDirectory(prefix="certlabel-verify-") as tmp:
                    directory = extract_release_zip(path, Path(tmp))
                    manifest = verify_release(directory)
                    manifest_sha256 = sha256_file(directory / MANIFEST)[0]
            else:
                raise CommandError(f"{path}: neither a release directory nor a zip")
            expected = (options.get("sha256") or "").strip().lower()
            if expected and expected != manifest_sha256:
                raise ReleaseFormatError(
                    [f"{MANIFEST}: sha256 is {manifest_sha256}, expected {expected}"]
                )
        except ReleaseFormatError as exc:
            for problem in exc.problems:
                self.stderr.write(f"{path}: {problem}")
            count = len(exc.problems)
            raise CommandError(
                f"{path}: does not verify ({count} difference{'s' if count != 1 else ''})"
            ) from exc
        for line in summary_lines(manifest):
            self.stdout.write(line)
        self.stdout.write(f"  manifest sha256 {manifest_sha256} (compare with the release page)")
