"""Releases: frozen certified label sets, their builds, and the tags that name them."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from labeling.models import LeasedWork, Project

RELEASE_VERSION_PATTERN = r"^(0|[1-9][0-9]{0,8})(\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8}))?$"


def release_version_key(version: str) -> tuple[int, ...]:
    """Return the sort key of a release version: "3" → (3,), "1.2.0" → (1, 2, 0).

    Versions of both kinds compare by their numbers: "2" > "1.9.9" and "1.10.0" > "1.9.0".
    """
    return tuple(int(part) for part in version.split("."))


class Release(models.Model):
    """A frozen, immutable certified label set of a project.

    Freezing pins the database state the release describes: ``cutoff`` holds, per append-only
    table, the largest row id committed when the release was frozen (labels are append-only, so
    "rows with id ≤ cutoff" is exactly the state at that moment), and ``report`` holds the
    agreement, held-out and audit figures as they stood. Builds read only that state, so every
    build of a release gives byte-identical files. ``certifies`` lists the calibration specs and
    runs the release certifies (spec id, version, content sha256; run id, input sha256).
    The project's slug, name and split are copied as they stood (a later rename or split must
    not change a rebuild): a split frozen after the release leaves its questions unpartitioned.

    Immutable: the database refuses any UPDATE (trigger); the app, API and admin offer neither
    edit nor delete; a correction is a new release whose ``parent`` is this one. ``version`` is an
    increasing integer ("3") or a semantic version ("1.2.0"); it grows along the parent chain.
    """

    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="releases")
    version = models.CharField(max_length=32)
    # The project's slug and name are pinned too: a later rename must not change the files.
    project_slug = models.CharField(
        max_length=64, help_text="The project's slug when the release was frozen."
    )
    project_name = models.CharField(
        max_length=200, help_text="The project's name when the release was frozen."
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    policy = models.ForeignKey("labeling.LabelPolicy", on_delete=models.PROTECT, related_name="+")
    partition = models.JSONField(
        default=dict,
        help_text="The split as it stood when the release was frozen: frozen, seed, proportions.",
    )
    certifies = models.JSONField(default=list, blank=True)
    cutoff = models.JSONField(default=dict)
    report = models.JSONField(default=dict)
    notes = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["project", "version"], name="release_unique_version"),
            models.CheckConstraint(
                condition=Q(version__regex=RELEASE_VERSION_PATTERN), name="release_version_format"
            ),
            models.CheckConstraint(
                condition=~Q(parent=models.F("pk")), name="release_not_own_parent"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project.slug} {self.version}"


class BuildStatus(models.TextChoices):
    """Where a release build stands."""

    PENDING = "pending", "pending"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"


class ReleaseBuild(LeasedWork):
    """One build of a release's files by the Celery task (with progress for the page).

    The first done build is the release's content: its files are in the release storage under
    ``storage_prefix`` and ``files`` lists each file's name, sha256 and size (the manifest's own
    hash is ``manifest_sha256``). A later build (a rebuild) writes elsewhere, is compared file by
    file with the first, and records whether every byte matched (``matches``).

    While it runs, its worker holds its lease (``labeling.engine``); a build whose worker died
    is built again by the engine's recovery pass.
    """

    release = models.ForeignKey(Release, on_delete=models.PROTECT, related_name="builds")
    status = models.CharField(
        max_length=8, choices=BuildStatus.choices, default=BuildStatus.PENDING
    )
    is_rebuild = models.BooleanField(default=False)
    storage_prefix = models.CharField(max_length=500, blank=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    files = models.JSONField(default=list, blank=True)
    manifest_sha256 = models.CharField(max_length=64, blank=True)
    archive_sha256 = models.CharField(max_length=64, blank=True)
    archive_size = models.PositiveBigIntegerField(null=True, blank=True)
    matches = models.BooleanField(null=True, blank=True)
    mismatches = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["release", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=BuildStatus.values), name="release_build_status"
            ),
            models.CheckConstraint(
                condition=~Q(status=BuildStatus.FAILED) | ~Q(error=""),
                name="release_build_failed_has_error",
            ),
            models.UniqueConstraint(
                fields=["release"],
                condition=Q(is_rebuild=False),
                name="release_build_one_first_build",
            ),
        ]

    def __str__(self) -> str:
        kind = "rebuild" if self.is_rebuild else "build"
        return f"{kind} {self.pk} of release {self.release_id} ({self.status})"

    @property
    def is_finished(self) -> bool:
        """Whether the build is done or failed (its page stops refreshing)."""
        return self.status in (BuildStatus.DONE, BuildStatus.FAILED)


class ReleaseTag(models.Model):
    """A movable name (``latest``, ``paper-v1``) pointing at one release of a project.

    Every move is kept in ``ReleaseTagMove``.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="release_tags")
    name = models.SlugField(max_length=64)
    release = models.ForeignKey(Release, on_delete=models.PROTECT, related_name="tags")
    moved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    moved_at = models.DateTimeField()

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="release_tag_unique_name"),
        ]

    def __str__(self) -> str:
        return f"{self.name} → {self.release_id}"


class ReleaseTagMove(models.Model):
    """One placement of a tag on a release (append-only history of ``ReleaseTag``)."""

    tag = models.ForeignKey(ReleaseTag, on_delete=models.CASCADE, related_name="moves")
    release = models.ForeignKey(Release, on_delete=models.PROTECT, related_name="+")
    previous = models.ForeignKey(
        Release, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    moved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    moved_at = models.DateTimeField()

    class Meta:
        ordering = ["tag", "moved_at", "pk"]

    def __str__(self) -> str:
        return f"{self.tag_id}: {self.previous_id} → {self.release_id}"
