"""``manage.py verify_release PATH``: check a release directory or zip against its manifest.

Recomputes every file's sha256 and size and every count of the manifest (from labels.jsonl and
sources.jsonl) and prints OK with the counts, or lists every difference on stderr and exits 1.
A zip (``release.zip`` or a download) is first extracted into a temporary directory, refusing
absolute paths, ``..``, links and members larger than they declare.
"""

from __future__ import annotations

import stat
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.release_format import MANIFEST, ReleaseFormatError, verify_release

CHUNK = 1 << 20
# The counts printed after OK, in this order.
SUMMARY = (
    "items",
    "resolved",
    "consensus",
    "adjudicated",
    "unresolved",
    "pending",
    "claims",
    "annotations",
    "evaluator_labels",
)


def _member_parts(name: str) -> tuple[str, ...]:
    """The path parts of a zip member, or raise for a name that could escape the target."""
    path = PurePosixPath(name)
    parts = path.parts
    if (
        not parts
        or path.is_absolute()
        or "\\" in name
        or "\0" in name
        or ".." in parts
        or ":" in parts[0]
    ):
        raise ReleaseFormatError([f"zip member {name!r}: not a relative path inside the release"])
    return parts


def extract_zip(archive: Path, target: Path) -> Path:
    """Extract ``archive`` into ``target`` safely; return the directory holding manifest.json.

    The manifest is at the top of the zip or in its one top-level folder (``<project>-<version>/``
    as the release's archive has it).

    Raises:
        ReleaseFormatError: an unsafe or corrupt member, or no manifest.
    """
    root = target.resolve()
    try:
        with zipfile.ZipFile(archive) as zipped:
            for info in zipped.infolist():
                parts = _member_parts(info.filename)
                if stat.S_ISLNK(info.external_attr >> 16):
                    raise ReleaseFormatError([f"zip member {info.filename!r}: a link"])
                destination = root.joinpath(*parts)
                if not destination.resolve().is_relative_to(root):
                    raise ReleaseFormatError([f"zip member {info.filename!r}: outside the release"])
                if info.is_dir():
                    destination.mkdir(parents=True, exist_ok=True)
                    continue
                destination.parent.mkdir(parents=True, exist_ok=True)
                written = 0
                with zipped.open(info) as source, destination.open("xb") as out:
                    while block := source.read(CHUNK):
                        written += len(block)
                        if written > info.file_size:
                            raise ReleaseFormatError(
                                [f"zip member {info.filename!r}: larger than it declares"]
                            )
                        out.write(block)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, FileExistsError, EOFError) as exc:
        raise ReleaseFormatError([f"{archive}: not a readable zip ({exc})"]) from None
    if (root / MANIFEST).is_file():
        return root
    folders = [path for path in root.iterdir() if path.is_dir()]
    if len(folders) == 1 and (folders[0] / MANIFEST).is_file():
        return folders[0]
    raise ReleaseFormatError([f"{archive}: no {MANIFEST} at the top or in one top-level folder"])


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

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["path"]
        if not path.exists():
            raise CommandError(f"{path}: no such file or directory")
        try:
            if path.is_dir():
                manifest = verify_release(path)
            elif zipfile.is_zipfile(path):
                with tempfile.TemporaryDirectory(prefix="certlabel-verify-") as tmp:
                    manifest = verify_release(extract_zip(path, Path(tmp)))
            else:
                raise CommandError(f"{path}: neither a release directory nor a zip")
        except ReleaseFormatError as exc:
            for problem in exc.problems:
                self.stderr.write(f"{path}: {problem}")
            count = len(exc.problems)
            raise CommandError(
                f"{path}: does not verify ({count} difference{'s' if count != 1 else ''})"
            ) from exc
        for line in summary_lines(manifest):
            self.stdout.write(line)
