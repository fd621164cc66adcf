"""``manage.py export_release``: freeze a release and build it, export one, or rebuild one.

Freeze a new release as a manager (``--user``) and build it::

    manage.py export_release --project SLUG --version V --user NAME [--parent V | --no-parent]
        [--runs ID [ID ...] | --no-runs] [--notes TEXT] [--out DIR]

Export an existing release (``--existing``), or rebuild one and compare every byte with its
stored files (``--rebuild --user NAME``; exits 1 when a byte differs)::

    manage.py export_release --project SLUG --version V --existing --out DIR
    manage.py export_release --project SLUG --version V --rebuild --user NAME

The build runs in this process when no Celery worker has taken it (so the command works without
a worker); a build a worker is running is waited for, with a progress bar. ``--out DIR`` copies
the files into ``DIR/<project>-<version>/`` and verifies the copy (every hash and count).
Defaults as on the Releases page: the parent is the latest release, the certified runs the latest
done run of every latest spec version.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from certification.models import BuildStatus, Release, ReleaseBuild
from certification.selectors import (
    release_by_version,
    release_content_build,
    release_latest,
)
from certification.services.releases import (
    release_build_execute,
    release_build_fail,
    release_export,
    release_freeze,
    release_rebuild,
)
from certification.services.releases.freeze import build_is_stale
from labeling.exceptions import Conflict, LabelingError
from labeling.models import Project
from labeling.release_format import ReleaseFormatError
from labeling.release_verify import verify_release

#: How long to wait for a worker that is building the release, in seconds.
WAIT_SECONDS = 3600
POLL_SECONDS = 0.5


class Command(BaseCommand):
    """Freeze, export or rebuild a release of a project."""

    help = (
        "Freeze a release of a project as a manager and build it (or export an existing one with "
        "--existing, or rebuild one and compare every byte with --rebuild); --out DIR copies the "
        "files into DIR/<project>-<version>/ and verifies them."
    )

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        # --version names the release here: it replaces Django's (which prints Django's version)
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument(
            "--version", dest="release_version", required=True, help="the release's version"
        )
        parser.add_argument(
            "--user", help="username of the manager who freezes or rebuilds (not for --existing)"
        )
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument(
            "--existing", action="store_true", help="export an existing release (no freeze)"
        )
        mode.add_argument(
            "--rebuild",
            action="store_true",
            help="rebuild an existing release and compare it byte by byte (exit 1 if not equal)",
        )
        parent = parser.add_mutually_exclusive_group()
        parent.add_argument("--parent", help="the parent release's version (default: the latest)")
        parent.add_argument("--no-parent", action="store_true", help="freeze without a parent")
        runs = parser.add_mutually_exclusive_group()
        runs.add_argument(
            "--runs",
            nargs="+",
            type=int,
            metavar="ID",
            help="calibration run ids to certify (default: the latest done run of each spec)",
        )
        runs.add_argument("--no-runs", action="store_true", help="certify no calibration run")
        parser.add_argument("--notes", default="", help="notes shown on the page and in the card")
        parser.add_argument("--out", type=Path, help="copy the files into OUT/<project>-<version>/")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project {options['project']!r}")
        version = options["release_version"]
        freezing = not (options["existing"] or options["rebuild"])
        if not freezing:
            given = [
                flag
                for flag, key in (
                    ("--parent", "parent"),
                    ("--no-parent", "no_parent"),
                    ("--runs", "runs"),
                    ("--no-runs", "no_runs"),
                    ("--notes", "notes"),
                )
                if options[key]
            ]
            if given:
                raise CommandError(f"{', '.join(given)}: only when freezing a new release")
        try:
            if freezing:
                release = self._freeze(project, version, options)
                build = release_content_build(release)
            else:
                release = release_by_version(project=project, version=version)
                build = release_content_build(release)
                if options["rebuild"]:
                    build = release_rebuild(release=release, actor=self._user(options))
            if build is None:
                raise CommandError(f"release {release.version} has no build")
            build = self._finish(build, options["no_progress"])
        except LabelingError as exc:
            raise CommandError(exc.message) from exc
        if build.is_rebuild:
            self._compared(release, build)
        else:
            self._built(release, build)
        if options["out"] is not None:
            self._export(release, options["out"])

    # -- steps ---------------------------------------------------------------------------------

    def _user(self, options: dict[str, Any]) -> Any:
        if not options["user"]:
            raise CommandError("--user USERNAME is required: the manager who does this")
        user = get_user_model().objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"no user {options['user']!r}")
        return user

    def _freeze(self, project: Project, version: str, options: dict[str, Any]) -> Release:
        actor = self._user(options)
        if options["no_parent"]:
            parent = None
        elif options["parent"]:
            parent = release_by_version(project=project, version=options["parent"])
        else:
            parent = release_latest(project=project)
        run_ids = [] if options["no_runs"] else options["runs"]
        release = release_freeze(
            project=project,
            actor=actor,
            version=version,
            parent=parent,
            run_ids=run_ids,
            notes=options["notes"],
        )
        self.stderr.write(
            f"release {release.version} of {project.slug} frozen"
            + (f" (parent {parent.version})" if parent is not None else " (no parent)")
        )
        return release

    def _finish(self, build: ReleaseBuild, quiet: bool) -> ReleaseBuild:
        """Build in this process unless a worker has taken it; wait for a worker's build."""
        build.refresh_from_db()
        if build.status == BuildStatus.PENDING:
            self.stderr.write(f"building release files in this process (build {build.pk}) ...")
            try:
                build = release_build_execute(build_id=build.pk)
            except Conflict:
                build.refresh_from_db()  # a worker took it meanwhile: wait for it below
            except LabelingError:
                raise
            except Exception as exc:
                release_build_fail(build_id=build.pk, error=f"{type(exc).__name__}: {exc}")
                raise CommandError(f"build {build.pk} failed: {type(exc).__name__}: {exc}") from exc
        if build.status in (BuildStatus.PENDING, BuildStatus.RUNNING):
            build = self._wait(build, quiet)
        if build.status == BuildStatus.FAILED:
            raise CommandError(
                f"build {build.pk} failed: {build.error} (rebuild with --rebuild to retry)"
            )
        return build

    def _wait(self, build: ReleaseBuild, quiet: bool) -> ReleaseBuild:
        waited = 0.0
        with tqdm(
            total=build.progress_total or None,
            desc=f"build {build.pk}",
            unit="candidate",
            disable=quiet,
        ) as bar:
            while build.status in (BuildStatus.PENDING, BuildStatus.RUNNING):
                if build_is_stale(build):
                    raise CommandError(
                        f"build {build.pk} lost its worker (no heartbeat, or its task lost, "
                        "within the lapse): the recovery task builds it again, or run again "
                        "with --rebuild --user MANAGER"
                    )
                if waited >= WAIT_SECONDS:
                    raise CommandError(f"build {build.pk} is still {build.status} after {waited} s")
                time.sleep(POLL_SECONDS)
                waited += POLL_SECONDS
                build.refresh_from_db()
                if build.progress_total and bar.total != build.progress_total:
                    bar.total = build.progress_total
                bar.n = build.progress_done
                bar.refresh()
        return build

    def _built(self, release: Release, build: ReleaseBuild) -> None:
        self.stdout.write(
            f"release {release.version} of {release.project.slug}: build {build.pk} done, "
            f"manifest sha256 {build.manifest_sha256}"
        )
        for entry in build.files:
            self.stdout.write(f"  {entry['name']:<20} {entry['size']:>12}  {entry['sha256']}")
        self.stdout.write(f"  {'release.zip':<20} {build.archive_size:>12}  {build.archive_sha256}")

    def _compared(self, release: Release, build: ReleaseBuild) -> None:
        if build.matches:
            self.stdout.write(
                f"release {release.version}: rebuild {build.pk} matches every byte of every file "
                f"(manifest sha256 {build.manifest_sha256})"
            )
            return
        for mismatch in build.mismatches:
            self.stderr.write(
                f"{mismatch['name']}: rebuilt sha256 {mismatch['sha256']}, stored "
                f"{mismatch['stored_sha256']}"
            )
        raise CommandError(
            f"release {release.version}: rebuild {build.pk} differs from the stored files in "
            f"{len(build.mismatches)} file(s)"
        )

    def _export(self, release: Release, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        try:
            directory = release_export(release=release, directory=out)
            verify_release(directory)
        except ReleaseFormatError as exc:
            for problem in exc.problems:
                self.stderr.write(problem)
            raise CommandError(f"the exported copy in {out} does not verify") from exc
        except LabelingError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"exported to {directory} (verified)")
