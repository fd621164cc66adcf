"""Verifying a release (schema 1.x) before anything reads it, and extracting its zip safely.

Pure Python (no Django), like :mod:`labeling.release_format`, whose file names, hashing and
counts it checks: :func:`verify_release` checks the schema major, every file's sha256 and size
and every count; :func:`extract_release_zip` refuses unsafe member names and oversized
manifests.
"""

from __future__ import annotations

import json
import stat
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import IO, Any

from labeling.release_format import (
    ARCHIVE,
    CONTENT_FILES,
    LABELS_JSONL,
    LEDGER,
    MANIFEST,
    SOURCES_JSONL,
    ReleaseFormatError,
    check_schema_version,
    echo_value,
    label_counts,
    sha256_file,
    sha256_stream,
)


def iter_jsonl(stream: IO[bytes], name: str) -> Iterable[dict[str, Any]]:
    """Yield the objects of a JSONL stream, one per line.

    Raises:
        ReleaseFormatError: a line is not a JSON object (naming the file and line).
    """
    for number, raw in enumerate(stream, start=1):
        try:
            value = json.loads(raw, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
        except RecursionError:
            raise ReleaseFormatError([f"{name} line {number}: JSON nested too deeply"]) from None
        except ValueError as exc:
            raise ReleaseFormatError([f"{name} line {number}: not JSON ({exc})"]) from None
        if not isinstance(value, dict):
            raise ReleaseFormatError([f"{name} line {number}: not a JSON object"])
        yield value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for key, item in pairs:
        if key in value:
            raise ValueError(f"key {echo_value(key)} repeats")
        value[key] = item
    return value


def read_manifest(directory: Path) -> dict[str, Any]:
    """Read and check ``manifest.json`` of the release in ``directory``.

    Raises:
        ReleaseFormatError: missing, not JSON, not a certlabel release or an unknown major.
    """
    path = directory / MANIFEST
    if not path.is_file():
        raise ReleaseFormatError([f"{directory}: no {MANIFEST}"])
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except RecursionError:
        raise ReleaseFormatError([f"{MANIFEST}: JSON nested too deeply"]) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReleaseFormatError([f"{MANIFEST}: not JSON ({exc})"]) from None
    if not isinstance(manifest, dict):
        raise ReleaseFormatError([f"{MANIFEST}: not a JSON object"])
    check_schema_version(manifest)
    return manifest


def verify_files(directory: Path, manifest: Mapping[str, Any]) -> list[str]:
    """Return every difference between the files in ``directory`` and the manifest's list.

    Checks each listed file's presence, size and sha256, and that no content file is missing
    from the list. An empty list means every byte matches.
    """
    problems: list[str] = []
    listed = manifest.get("files")
    if not isinstance(listed, list):
        return [f"{MANIFEST}: files is not a list"]
    names = set()
    for index, entry in enumerate(listed):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or "/" in name or "\\" in name or name.startswith("."):
            problems.append(
                f"{MANIFEST}: files[{index}].name {echo_value(name)} is not a plain file name"
            )
            continue
        names.add(name)
        path = directory / name
        if not path.is_file():
            problems.append(f"{name}: listed in the manifest but missing")
            continue
        sha256, size = sha256_file(path)
        if size != entry.get("size"):
            problems.append(f"{name}: size is {size} bytes, the manifest says {entry.get('size')}")
        if sha256 != entry.get("sha256"):
            problems.append(f"{name}: sha256 is {sha256}, the manifest says {entry.get('sha256')}")
    for name in CONTENT_FILES:
        if name not in names:
            problems.append(f"{MANIFEST}: {name} is not listed")
    return problems


def verify_release(directory: Path) -> dict[str, Any]:
    """Verify the release in ``directory``: schema, every file's sha256 and size, every count.

    The counts are recomputed from ``labels.jsonl`` (streamed) and compared with the
    manifest's; the number of lines of ``sources.jsonl`` with ``counts.sources``.

    Returns:
        The manifest, when everything matches.

    Raises:
        ReleaseFormatError: listing every difference found.
    """
    manifest = read_manifest(directory)
    problems = verify_files(directory, manifest)
    labels = directory / LABELS_JSONL
    if labels.is_file():
        try:
            with labels.open("rb") as stream:
                counts = label_counts(iter_jsonl(stream, LABELS_JSONL))
        except (ReleaseFormatError, KeyError, TypeError, AttributeError, ValueError) as exc:
            # Our own refusal already caps what it quotes; any other error may hold a whole value.
            detail = str(exc) if isinstance(exc, ReleaseFormatError) else echo_value(str(exc))
            problems.append(f"{LABELS_JSONL}: cannot be counted ({detail})")
        else:
            expected = manifest.get("counts", {})
            # Releases before schema 1.2 have no per-version counts.
            scopes = ["overall", "per_partition"]
            if "per_policy_version" in expected:
                scopes.append("per_policy_version")
            for scope in scopes:
                if counts[scope] != expected.get(scope):
                    problems.append(
                        f"{MANIFEST}: counts.{scope} differ from those recomputed from "
                        f"{LABELS_JSONL}: {_first_difference(expected.get(scope), counts[scope])}"
                    )
    sources = directory / SOURCES_JSONL
    if sources.is_file():
        try:
            with sources.open("rb") as stream:
                lines = sum(1 for _ in iter_jsonl(stream, SOURCES_JSONL))
        except ReleaseFormatError as exc:
            problems += exc.problems
            lines = None
        if lines is not None and lines != manifest.get("counts", {}).get("sources"):
            problems.append(
                f"{MANIFEST}: counts.sources is {manifest.get('counts', {}).get('sources')}, "
                f"{SOURCES_JSONL} has {lines} lines"
            )
    problems += _check_ledger(directory, manifest)
    problems += _check_extra_files(directory, manifest)
    if (directory / ARCHIVE).is_file():
        problems += verify_archive(directory / ARCHIVE, directory, manifest)
    if problems:
        raise ReleaseFormatError(problems)
    return dict(manifest)


def _listed(manifest: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        entry["name"]: entry
        for entry in manifest.get("files") or []
        if isinstance(entry, dict) and isinstance(entry.get("name"), str)
    }


def _check_ledger(directory: Path, manifest: Mapping[str, Any]) -> list[str]:
    """The ledgers must be those of the runs the manifest says the release certifies."""
    path = directory / LEDGER
    if not path.is_file():
        return []
    try:
        ledger = json.loads(path.read_text("utf-8"), parse_constant=_no_constant)
        found = [(entry["spec"], entry["run"]) for entry in ledger]
    except RecursionError:
        return [f"{LEDGER}: JSON nested too deeply"]
    except (ValueError, TypeError, KeyError) as exc:
        return [f"{LEDGER}: not a list of ledgers ({exc})"]
    certifies = manifest.get("certifies") or []
    expected = [(e.get("spec"), e.get("run")) for e in certifies if isinstance(e, dict)]
    if found != expected:
        return [
            f"{LEDGER}: its runs differ from the manifest's certifies ({len(found)} vs "
            f"{len(expected)} runs, or other hashes)"
        ]
    return []


def _check_extra_files(directory: Path, manifest: Mapping[str, Any]) -> list[str]:
    """A release directory holds the manifest, the files it lists and at most its zip."""
    allowed = {MANIFEST, ARCHIVE, *_listed(manifest)}
    return [
        f"{path.name}: not part of the release (the manifest does not list it)"
        for path in sorted(directory.iterdir())
        if path.name not in allowed or not path.is_file() or path.is_symlink()
    ]


def verify_archive(archive: Path, directory: Path, manifest: Mapping[str, Any]) -> list[str]:
    """Compare a release's zip with the verified files beside it, member by member (sha256).

    The zip must hold exactly the manifest and the files it lists, once each, in one folder or
    none, under the same rules :func:`extract_release_zip` applies.
    """
    problems: list[str] = []
    expected = {name: entry.get("sha256") for name, entry in _listed(manifest).items()}
    expected[MANIFEST] = sha256_file(directory / MANIFEST)[0]
    try:
        with zipfile.ZipFile(archive) as zipped:
            seen: set[str] = set()
            folders: set[str | None] = set()
            for info in zipped.infolist():
                try:
                    folder, name = _member_name(info)
                except ReleaseFormatError as exc:
                    problems += [f"{ARCHIVE}: {problem}" for problem in exc.problems]
                    continue
                if info.is_dir():
                    folders.add(folder if folder is not None else name)
                    continue
                folders.add(folder)
                if name in seen:
                    problems.append(f"{ARCHIVE}: member {echo_value(info.filename)} appears twice")
                    continue
                seen.add(name)
                if name not in expected:
                    problems.append(
                        f"{ARCHIVE}: member {echo_value(info.filename)} is not in the release"
                    )
                    continue
                with zipped.open(info) as stream:
                    if sha256_stream(stream)[0] != expected[name]:
                        problems.append(
                            f"{ARCHIVE}: member {echo_value(info.filename)} differs from {name}"
                        )
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        return [f"{ARCHIVE}: not a readable zip ({exc})"]
    if len(folders) > 1:
        problems.append(f"{ARCHIVE}: more than one folder: a release is one folder or none")
    problems += [f"{ARCHIVE}: {name} is missing" for name in sorted(set(expected) - seen)]
    return problems


def _first_difference(expected: Any, actual: Any, path: str = "") -> str:
    """Describe the first place where two JSON values differ (for an error message)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(set(expected) | set(actual)):
            if expected.get(key) != actual.get(key):
                return _first_difference(expected.get(key), actual.get(key), f"{path}.{key}")
    # a sha256 (66 code points as a repr) is shown whole; anything longer is cut
    shown = f"manifest {echo_value(expected, 70)}, recomputed {echo_value(actual, 70)}"
    return f"{path.lstrip('.') or 'value'}: {shown}"


MAX_MANIFEST_BYTES = 64 * 1024 * 1024


def _member_name(info: zipfile.ZipInfo) -> tuple[str | None, str]:
    """Split a zip member into (folder or None, file name); raise for anything unsafe."""
    name = info.filename
    parts = PurePosixPath(name).parts
    if (
        not parts
        or name.startswith("/")
        or "\\" in name
        or "\0" in name
        or ".." in parts
        or ":" in parts[0]
        or len(parts) > 2
    ):
        raise ReleaseFormatError([f"zip member {echo_value(name)}: not a file of the release"])
    if stat.S_ISLNK(info.external_attr >> 16):
        raise ReleaseFormatError([f"zip member {echo_value(name)}: a link"])
    return (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])


def extract_release_zip(source: Path | IO[bytes], target: Path) -> Path:
    """Extract a release zip into the directory ``target``; return the release's directory.

    The release is at the top of the zip or in one top-level folder (``<slug>-<version>/``, as
    the built ``release.zip`` has it). Only the manifest and the files it lists are accepted:
    any other member, a duplicate, a link, a path leaving the folder, a manifest over 64 MiB or
    a member whose bytes exceed the size the manifest gives it is refused before it is written
    further, so a crafted zip cannot fill the disk.

    Raises:
        ReleaseFormatError: not a zip, or a member refused as above (naming it).
    """
    try:
        archive = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ReleaseFormatError([f"not a readable zip ({exc})"]) from None
    with archive:
        members: dict[str, zipfile.ZipInfo] = {}
        folders: set[str | None] = set()
        for info in archive.infolist():
            if info.is_dir():
                folder, name = _member_name(info)
                folders.add(folder if folder is not None else name)
                continue
            folder, name = _member_name(info)
            folders.add(folder)
            if name in members:
                raise ReleaseFormatError([f"zip member {echo_value(info.filename)}: appears twice"])
            members[name] = info
        if len(folders) > 1:
            raise ReleaseFormatError(
                ["the zip holds more than one folder: a release is one folder or none"]
            )
        if MANIFEST not in members:
            raise ReleaseFormatError([f"no {MANIFEST} in the zip"])
        (folder,) = folders or {None}
        directory = target / folder if folder else target
        directory.mkdir(parents=True, exist_ok=True)
        _extract_member(archive, members[MANIFEST], directory / MANIFEST, MAX_MANIFEST_BYTES)
        manifest = read_manifest(directory)
        sizes: dict[Any, Any] = {
            entry.get("name"): entry.get("size")
            for entry in manifest.get("files") or []
            if isinstance(entry, dict)
        }
        for name, info in members.items():
            if name == MANIFEST:
                continue
            size = sizes.get(name)
            if name not in sizes or not isinstance(size, int):
                raise ReleaseFormatError(
                    [f"zip member {echo_value(info.filename)}: not a file the manifest lists"]
                )
            _extract_member(archive, info, directory / name, size)
    return directory


def _extract_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path, limit: int
) -> None:
    written = 0
    try:
        with archive.open(info) as source, path.open("xb") as out:
            while block := source.read(1 << 20):
                written += len(block)
                if written > limit:
                    raise ReleaseFormatError(
                        [
                            f"zip member {echo_value(info.filename)}: larger than the manifest "
                            f"says ({limit} B)"
                        ]
                    )
                out.write(block)
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        raise ReleaseFormatError(
            [f"zip member {echo_value(info.filename)}: unreadable ({exc})"]
        ) from None
