"""Release selectors: read releases, builds and tags for pages and the API.

Reads only: freezing, rebuilding and moving tags are ``certification.services.releases``.
Another project's release (or an id beyond 64 bits) is ``ReleaseNotFound``, never someone
else's data.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.core.files.storage import Storage, storages
from django.db.models import Prefetch, Q, QuerySet

from certification.exceptions import ReleaseFileNotFound, ReleaseNotFound
from certification.models import (
    BuildStatus,
    CalibrationRun,
    CalibrationSpec,
    Release,
    ReleaseBuild,
    ReleaseTag,
    ReleaseTagMove,
    RunStatus,
    release_version_key,
)
from labeling.models import MAX_ID, Project
from labeling.release_format import ARCHIVE, MANIFEST, MEDIA_TYPES, CountBlock
from labeling.storage import storage_read_stream

#: The Django storage alias (settings.STORAGES) that holds built releases.
RELEASE_STORAGE = "releases"
#: How many done calibration runs the freeze form offers (newest first).
FREEZE_FORM_RUNS = 50


@dataclass(frozen=True)
class ReleaseFile:
    """One downloadable file of a release build."""

    name: str
    sha256: str
    size: int | None
    media_type: str


def release_list(*, project: Project) -> QuerySet[Release]:
    """Return the project's releases, newest first, with parent, policy, builds and tags."""
    return (
        Release.objects.filter(project=project)
        .select_related("parent", "policy", "created_by")
        .prefetch_related(
            Prefetch("builds", queryset=ReleaseBuild.objects.order_by("pk")),
            Prefetch("tags", queryset=ReleaseTag.objects.order_by("name")),
        )
        .order_by("-created_at", "-pk")
    )


def release_get(*, project: Project, release_id: int) -> Release:
    """Return the release ``release_id`` of ``project`` (never another project's).

    Raises:
        ReleaseNotFound: no such release in the project (ids beyond 64 bits included).
    """
    release = None
    if 0 < release_id <= MAX_ID:
        release = release_list(project=project).filter(pk=release_id).first()
    if release is None:
        raise ReleaseNotFound(f"no release {release_id} in project {project.slug!r}")
    return release


def release_by_version(*, project: Project, version: str) -> Release:
    """Return the project's release of version ``version``.

    Raises:
        ReleaseNotFound: no such version in the project.
    """
    release = release_list(project=project).filter(version=version).first()
    if release is None:
        raise ReleaseNotFound(f"no release {version!r} in project {project.slug!r}")
    return release


def release_latest(*, project: Project) -> Release | None:
    """Return the project's release with the greatest version, or None."""
    releases = list(Release.objects.filter(project=project).only("pk", "version", "project_id"))
    return max(releases, key=lambda r: release_version_key(r.version), default=None)


def release_next_version(*, project: Project) -> str:
    """Suggest the next version of the project's releases.

    The latest integer + 1, or the latest semantic version's next patch ("1.2.0" → "1.2.1");
    "1" for the first release.
    """
    latest = release_latest(project=project)
    if latest is None:
        return "1"
    parts = list(release_version_key(latest.version))
    parts[-1] += 1
    return ".".join(str(part) for part in parts)


def release_children(*, release: Release) -> QuerySet[Release]:
    """Return the releases whose parent is ``release`` (its corrections), oldest first."""
    return Release.objects.filter(parent=release).order_by("created_at", "pk")


def release_content_build(release: Release) -> ReleaseBuild | None:
    """Return the release's first build (its content), or None; uses prefetched builds."""
    return next((build for build in release.builds.all() if not build.is_rebuild), None)


def release_rebuilds(release: Release) -> list[ReleaseBuild]:
    """Return the release's rebuilds (each compared with the first build), newest first."""
    return sorted(
        (build for build in release.builds.all() if build.is_rebuild),
        key=lambda build: build.pk,
        reverse=True,
    )


def release_is_building(builds: Iterable[ReleaseBuild | None]) -> bool:
    """Whether any of these builds is still pending or running (the page shows its progress)."""
    live = (BuildStatus.PENDING, BuildStatus.RUNNING)
    return any(build is not None and build.status in live for build in builds)


def release_files(build: ReleaseBuild | None) -> list[ReleaseFile]:
    """Return a done build's downloadable files: its listed files, then the archive (else none)."""
    if build is None or build.status != BuildStatus.DONE:
        return []
    files = [
        ReleaseFile(
            name=entry["name"],
            sha256=entry.get("sha256", ""),
            size=entry.get("size"),
            media_type=entry.get("media_type") or MEDIA_TYPES.get(entry["name"], ""),
        )
        for entry in build.files
        if isinstance(entry, dict) and isinstance(entry.get("name"), str)
    ]
    names = {f.name for f in files}
    if MANIFEST not in names and build.manifest_sha256:
        files.insert(0, ReleaseFile(MANIFEST, build.manifest_sha256, None, MEDIA_TYPES[MANIFEST]))
    if ARCHIVE not in names and build.archive_sha256:
        files.append(
            ReleaseFile(ARCHIVE, build.archive_sha256, build.archive_size, MEDIA_TYPES[ARCHIVE])
        )
    return files


def release_file_get(*, release: Release, name: str) -> tuple[ReleaseFile, ReleaseBuild]:
    """Return the file ``name`` of the release's content build, with the build.

    Only a name the done build lists (or its manifest or archive) is returned: any other name,
    a path included, is not found.

    Raises:
        ReleaseFileNotFound: the release is not built yet, or has no file of that name.
    """
    build = release_content_build(release)
    for file in release_files(build):
        if file.name == name:
            assert build is not None
            return file, build
    raise ReleaseFileNotFound(f"release {release.version} has no file {name!r}")


def release_storage() -> Storage:
    """The storage of built releases (``settings.STORAGES["releases"]``)."""
    return storages[RELEASE_STORAGE]


def release_file_stream(*, build: ReleaseBuild, file: ReleaseFile) -> Any:
    """Open a file of a done first build (from :func:`release_files`) for reading (binary).

    Its bytes come in order as they are read, from a local file or straight from the object
    store (``labeling.storage.storage_read_stream``): never whole in memory.
    """
    return storage_read_stream(release_storage(), build.storage_prefix + file.name)


def release_manifest(build: ReleaseBuild | None) -> dict[str, Any] | None:
    """Return the manifest of a done build, or None before it is done."""
    if build is None or build.status != BuildStatus.DONE:
        return None
    manifest = next(file for file in release_files(build) if file.name == MANIFEST)
    with release_file_stream(build=build, file=manifest) as stream:
        return json.load(stream)


def manifest_count_rows(manifest: dict[str, Any] | None) -> dict[str, Any]:
    """Return the manifest's counts as a table for the release page.

    ``columns`` (overall, then each partition) and ``rows`` of (count name, [(count,
    denominator, of) per column]); ``sources`` apart.
    """
    counts = (manifest or {}).get("counts") or {}
    overall = counts.get("overall") or {}
    partitions = counts.get("per_partition") or {}
    columns = ["overall", *partitions]
    blocks = [overall, *partitions.values()]
    order = list(CountBlock().as_json())  # the manifest's own order of the counts
    rows = []
    for key in sorted(overall, key=lambda k: (order.index(k) if k in order else len(order), k)):
        cells = []
        for block in blocks:
            cell = block.get(key) or {}
            cells.append((cell.get("count"), cell.get("denominator"), cell.get("of")))
        rows.append((key, cells))
    return {"columns": columns, "rows": rows, "sources": counts.get("sources")}


def release_tag_list(*, project: Project) -> QuerySet[ReleaseTag]:
    """Return the project's tags by name, with the release each points at and its moves."""
    return (
        ReleaseTag.objects.filter(project=project)
        .select_related("release", "moved_by")
        .prefetch_related(
            Prefetch(
                "moves",
                queryset=ReleaseTagMove.objects.select_related(
                    "release", "previous", "moved_by"
                ).order_by("moved_at", "pk"),
            )
        )
        .order_by("name")
    )


def release_tag_moves(*, release: Release) -> QuerySet[ReleaseTagMove]:
    """Return every placement of a tag on or off ``release``, newest first."""
    return (
        ReleaseTagMove.objects.filter(Q(release=release) | Q(previous=release))
        .select_related("tag", "release", "previous", "moved_by")
        .order_by("-moved_at", "-pk")
    )


def release_freezable_runs(*, project: Project) -> list[CalibrationRun]:
    """Return the done calibration runs the freeze form offers, newest first.

    The latest :data:`FREEZE_FORM_RUNS`, and the default runs (:func:`release_default_run_ids`)
    however old.
    """
    done = (
        CalibrationRun.objects.filter(project=project, status=RunStatus.DONE)
        .select_related("spec")
        .defer("result")
        .order_by("-finished_at", "-pk")
    )
    recent = [run.pk for run in done[:FREEZE_FORM_RUNS]]
    return list(done.filter(pk__in={*recent, *release_default_run_ids(project=project)}))


def release_default_run_ids(*, project: Project) -> list[int]:
    """Return the ids of the runs a release certifies by default, ascending.

    The latest done run of each latest spec version (as ``release_freeze`` with
    ``run_ids=None``).
    """
    ids = []
    for spec in CalibrationSpec.objects.filter(project=project, next_version__isnull=True):
        run = (
            CalibrationRun.objects.filter(spec=spec, status=RunStatus.DONE)
            .order_by("-finished_at", "-pk")
            .values_list("pk", flat=True)
            .first()
        )
        if run is not None:
            ids.append(run)
    return sorted(ids)
