"""Building a release's files from its pinned state.

``release_build_execute`` (the body of ``release_build_task``) streams every file
(:func:`~certification.services.releases.files.build_files`) into the build's working directory,
``certlabel-builds/build-<id>-<attempt>`` (labels are read in chunks and written as they come:
JSONL, CSV and one Parquet row group per chunk), writes the manifest and a zip of the whole, and
either stores the files (a release's first build) or compares them byte by byte with the stored ones
(a rebuild). Nothing in a content file depends on when or where it was built.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from certification.locks import release_build_lock
from certification.models import BuildStatus, Release, ReleaseBuild
from certification.selectors import (
    release_content_build,
    release_file_stream,
    release_files,
    release_storage,
)
from labeling import dispatch, engine
from labeling.exceptions import Conflict, NotFound
from labeling.release_format import ARCHIVE, CONTENT_FILES, MANIFEST, sha256_file

if TYPE_CHECKING:
    pass
from certification.services.releases.files import build_files

logger = logging.getLogger(__name__)


#: The folder, under the release storage (when local) or the system's temporary directory,
#: where each build writes its files: ``build-<build id>-<attempt>``.
WORK_FOLDER = "certlabel-builds"


def _local_root() -> str | None:
    """Return the release storage's directory when it is a local one, else None.

    Files are then built beside their final place and moved, not copied; None means the
    system's temporary directory.
    """
    storage = release_storage()
    if not isinstance(storage, FileSystemStorage):
        return None
    root = Path(storage.location)
    root.mkdir(parents=True, exist_ok=True)
    return str(root)


def build_work_root() -> Path:
    """The one parent folder of every build's working directory on this machine.

    ``CERTLABEL_BUILD_ROOT`` when set; else beside a local release storage (files are then
    moved into place, not copied); else a folder of the system's temporary directory named
    after the database, so that deployments (and test databases) sharing a machine never clean
    up each other's builds.
    """
    if settings.CERTLABEL_BUILD_ROOT:
        return Path(settings.CERTLABEL_BUILD_ROOT)
    local = _local_root()
    if local is not None:
        return Path(local) / WORK_FOLDER
    database = str(connection.settings_dict.get("NAME") or "")
    suffix = hashlib.sha256(database.encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"{WORK_FOLDER}-{suffix}"


def build_workdir(build_id: int, attempt: int) -> Path:
    """The working directory of attempt ``attempt`` of build ``build_id``.

    Named by both, so that a folder can be traced to its build and a new attempt never shares
    a folder with a killed one.
    """
    return build_work_root() / f"build-{build_id}-{attempt}"


def _workdirs() -> list[tuple[int, int, Path]]:
    """Every build working directory: (build id, attempt, path)."""
    root = build_work_root()
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        parts = path.name.split("-")
        if path.is_dir() and len(parts) == 3 and parts[0] == "build":
            if parts[1].isdigit() and parts[2].isdigit():
                found.append((int(parts[1]), int(parts[2]), path))
    return found


def build_workdirs_clean() -> list[int]:
    """Remove the working directories of builds that are not running; return their build ids.

    A killed build leaves its directory behind. A folder is kept only while its build is running
    that very attempt; every other one goes (the build finished, failed, was set back to
    pending by recovery, or no longer exists).

    Concurrency: the folders are listed before the builds are read. A folder exists only after
    its attempt's claim committed, so the read sees that attempt running (keep) or over
    (remove): a live build's folder is never removed.
    """
    found = _workdirs()
    if not found:
        return []
    running = dict(
        ReleaseBuild.objects.filter(
            pk__in={pk for pk, _, _ in found}, status=BuildStatus.RUNNING
        ).values_list("pk", "attempts")
    )
    removed = []
    for pk, attempt, path in found:
        if running.get(pk) != attempt:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(pk)
    if removed:
        logger.info("release_build.workdirs_removed", extra={"build_ids": sorted(removed)})
    return sorted(removed)


def _store(directory: Path, prefix: str) -> None:
    """Put every file of a built release into the release storage under ``prefix``."""
    storage = release_storage()
    for name in (MANIFEST, *CONTENT_FILES, ARCHIVE):
        path = prefix + name
        if storage.exists(path):
            storage.delete(path)  # a retried build's leftovers
        if isinstance(storage, FileSystemStorage):
            target = Path(storage.path(path))
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(directory / name, target)  # a rename within one file system
            continue
        with (directory / name).open("rb") as stream:
            saved = storage.save(path, File(stream, name=name))
        if saved != path:
            raise RuntimeError(f"release storage saved {path} as {saved}")


@contextmanager
def cycle_collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the block; restore its state after.

    A build allocates millions of small dicts, lists and tuples (the records and rows,
    acyclic: reference counting frees them), and every few hundred allocations the collector
    would walk the objects alive, the whole application included (50,000 candidates on
    SQLite: 11.0-12.3 s of CPU for the build with the collector running, 7.4-8.2 s paused).
    The collector is process-wide: while a build runs, other threads' cycles wait too.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _claim(build_id: int, lease_owner: str) -> ReleaseBuild:
    """Take the build's lease for ``lease_owner``; return the build (done: as it is).

    Raises:
        NotFound: no such build.
        Conflict: the build is held by a live worker elsewhere, failed, or out of attempts.
    """
    attempt = engine.claim(
        ReleaseBuild,
        build_id,
        lease_owner=lease_owner,
        when=Q(status__in=[BuildStatus.PENDING, BuildStatus.RUNNING]),
        cap=engine.max_attempts(),
        status=BuildStatus.RUNNING,
        enqueued_at=None,
        error="",
        progress_done=0,
    )
    build = ReleaseBuild.objects.select_related("release", "release__project").filter(pk=build_id)
    found = build.first()
    if found is None:
        raise NotFound(f"no release build {build_id}")
    if attempt is None and found.status != BuildStatus.DONE:
        raise Conflict(f"release build {build_id} is {found.status} (held by {found.lease_owner})")
    return found


def release_build_execute(*, build_id: int, task_id: str | None = None) -> ReleaseBuild:
    """Build (or rebuild and compare) the files of a release; the Celery task's body.

    A first build stores the files under ``<project id>/<release id>/<build id>/`` of the
    release storage. A rebuild writes to its working directory only (:func:`build_workdir`)
    and records, per file, whether its bytes equal the first build's (``matches``,
    ``mismatches``). A done build is returned unchanged (the task may be delivered twice).
    While it builds, its lease's heartbeat is written (:class:`labeling.engine.Lease`); the
    working directory is removed at the end, and one a killed build left behind is removed by
    the next start of that build or by :func:`build_workdirs_clean`.

    Args:
        build_id: the build.
        task_id: the Celery task's id (a retry of the same task takes its own lease back).

    Raises:
        NotFound: no such build.
        Conflict: the build is held by a live worker elsewhere.
    """
    me = engine.owner(task_id)
    build = _claim(build_id, me)
    if build.status == BuildStatus.DONE:
        return build
    release = build.release
    build_workdirs_clean()  # what killed builds left on this machine
    directory = build_workdir(build.pk, build.attempts)
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    try:
        with engine.Lease(ReleaseBuild, build.pk, lease_owner=me), cycle_collector_paused():
            update = _build_and_compare(release, build, directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    written = engine.release(
        ReleaseBuild,
        build.pk,
        lease_owner=me,
        status=BuildStatus.DONE,
        finished_at=timezone.now(),
        progress_done=F("progress_total"),
        **update,
    )
    if written:
        logger.info(
            "release_build.done",
            extra={
                "build_id": build.pk,
                "release_id": release.pk,
                "manifest_sha256": update["manifest_sha256"],
            },
        )
    build.refresh_from_db()
    return build


def _build_and_compare(release: Release, build: ReleaseBuild, directory: Path) -> dict[str, Any]:
    """Write the files into ``directory``; store or compare them; return the build's fields."""
    entries = build_files(release, directory, build)
    archive_sha256, archive_size = sha256_file(directory / ARCHIVE)
    manifest_sha256 = next(e["sha256"] for e in entries if e["name"] == MANIFEST)
    update: dict[str, Any] = {
        "files": entries,
        "manifest_sha256": manifest_sha256,
        "archive_sha256": archive_sha256,
        "archive_size": archive_size,
    }
    if build.is_rebuild:
        first = release_content_build(release)
        if first is None or first.status != BuildStatus.DONE:
            raise Conflict(f"release {release.version} has no finished build to compare with")
        stored = {e["name"]: e for e in first.files}
        mismatches = [
            {
                "name": entry["name"],
                "sha256": entry["sha256"],
                "stored_sha256": stored.get(entry["name"], {}).get("sha256"),
            }
            for entry in entries
            if stored.get(entry["name"], {}).get("sha256") != entry["sha256"]
        ]
        if first.archive_sha256 != archive_sha256:
            mismatches.append(
                {"name": ARCHIVE, "sha256": archive_sha256, "stored_sha256": first.archive_sha256}
            )
        update.update(matches=not mismatches, mismatches=mismatches)
    else:
        prefix = f"{release.project_id}/{release.pk}/{build.pk}/"
        _store(directory, prefix)
        update["storage_prefix"] = prefix
    return update


RELEASE_BUILD = "release_build"


def release_build_send(build_id: int) -> None:
    """Send a build's task to a worker (the engine's sender for release builds).

    The task is registered as ``RELEASE_BUILD`` by ``certification.tasks``
    (:mod:`labeling.dispatch`).
    """
    dispatch.task(RELEASE_BUILD).delay(build_id)


def release_build_work_kind() -> engine.WorkKind:
    """Release builds as the engine recovers them (registered in ``ready``).

    After each pass the working directories of builds that are not running are removed.
    """
    return engine.WorkKind(
        name=RELEASE_BUILD,
        model=ReleaseBuild,
        send=release_build_send,
        to_do=lambda: Q(status__in=[BuildStatus.PENDING, BuildStatus.RUNNING]),
        failed=lambda attempts: {
            "status": BuildStatus.FAILED,
            "error": f"failed: its worker stopped {attempts} times; not started again",
        },
        after_pass=build_workdirs_clean,
    )


def release_build_fail(
    *, build_id: int, error: str, lease_owner: str | None = None
) -> ReleaseBuild:
    """Mark a build failed with ``error``; a done build is left as it is.

    With ``lease_owner``, only if this owner still holds the build's lease (a worker whose
    lease the recovery pass took back fails nothing: the build is pending again).

    Raises:
        NotFound: no such build.
    """
    with transaction.atomic():
        build = release_build_lock(build_id)
        if build is None:
            raise NotFound(f"no release build {build_id}")
        not_ours = lease_owner is not None and build.lease_owner != lease_owner
        if build.status != BuildStatus.DONE and not not_ours:
            build.status = BuildStatus.FAILED
            build.error = error[:5000] or "failed"
            build.finished_at = timezone.now()
            build.lease_owner = ""
            build.save(update_fields=["status", "error", "finished_at", "lease_owner"])
    return build


def release_export(*, release: Release, directory: Path) -> Path:
    """Copy the files of ``release`` (its done first build) into ``directory/<slug>-<version>``.

    Raises:
        NotFound: the release has no done build yet.
    """
    build = release_content_build(release)
    if build is None or build.status != BuildStatus.DONE:
        raise NotFound(f"release {release.version} has no finished build")
    target = directory / f"{release.project_slug}-{release.version}"
    target.mkdir(parents=True, exist_ok=True)
    for file in release_files(build):
        with (
            release_file_stream(build=build, file=file) as source,
            (target / file.name).open("wb") as out,
        ):
            shutil.copyfileobj(source, out, 1 << 20)
    return target
