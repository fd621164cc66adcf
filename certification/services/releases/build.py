"""Building a release's files from its pinned state (stub: being written)."""

from __future__ import annotations

from pathlib import Path
from typing import IO

from certification.models import Release, ReleaseBuild


def release_build_execute(*, build_id: int) -> ReleaseBuild:
    """Build (or rebuild and compare) the files of a release; the Celery task's body."""
    raise NotImplementedError


def release_build_fail(*, build_id: int, error: str) -> ReleaseBuild:
    """Mark a build failed with ``error`` (the task calls it when the build raised)."""
    raise NotImplementedError


def release_content_build(release: Release) -> ReleaseBuild | None:
    """Return the release's first build (its content) or None."""
    raise NotImplementedError


def release_file_open(*, build: ReleaseBuild, name: str) -> IO[bytes]:
    """Open one file of a done build for reading (binary)."""
    raise NotImplementedError


def release_export(*, release: Release, directory: Path) -> Path:
    """Copy the files of a release's content build into ``directory``; return its path."""
    raise NotImplementedError
