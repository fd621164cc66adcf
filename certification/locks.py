"""The only row and advisory locks of the certification side (``labeling/locks.py`` has the rest).

Lock order across both apps. A transaction takes locks only in this order::

    the project's label-write lock (labeling.locks.project_label_writes_lock, shared;
        a release freeze takes it exclusive: :func:`release_freeze_lock`)
      →  Project (labeling.locks.project_lock)
      →  Membership  →  Item (ascending id when several)  →  Assignment rows of that item
      →  one kind of certification row: AgreementReport | ReliabilityReport | CalibrationSpec |
         ReleaseBuild

A labelling transaction takes no certification lock. Freezing a release takes its project's
label-write lock exclusive, as its first lock, and then the project row (``FOR NO KEY UPDATE``,
so labelling transactions' foreign-key checks still pass); it locks no table and nothing of
another project, so it never waits for, blocks or deadlocks another project's writes. It waits
for its own project's label transactions already in flight (they hold the lock shared), and
new ones wait for it; while it waits it holds nothing, and while it holds the lock no writer of
the project does, so it is in no cycle. Rebuilding and moving tags take the project only. The
certification row locks (:func:`agreement_report_lock`, :func:`reliability_report_lock`,
:func:`calibration_spec_lock`,
:func:`release_build_lock`) are taken by transactions that hold no labelling lock and take no
lock afterwards, one kind per transaction (a calibration refresh locks the project's latest
spec versions in ascending id). So no two transactions can wait in a cycle.

Every function here must be called inside ``transaction.atomic`` and evaluates its queryset at
once (a lazy ``select_for_update`` queryset locks nothing). On SQLite ``select_for_update`` is a
no-op and the advisory lock is skipped; there IMMEDIATE transactions serialise writers, and the
services' checks plus the database constraints are the guard.
"""

from __future__ import annotations

from django.db import connection
from django.utils import timezone

from certification.models import (
    AgreementReport,
    AuditReport,
    CalibrationSpec,
    ReleaseBuild,
    ReliabilityReport,
)
from labeling.locks import LABEL_WRITES_NAMESPACE
from labeling.models import Project


def agreement_report_lock(project: Project) -> tuple[AgreementReport, bool]:
    """Lock and return the project's agreement report, creating it if needed.

    The unique project key serialises concurrent creators. A new report has an empty
    ``input_sha256`` and ``computed_at`` now.

    Returns:
        The report and whether it was created.
    """
    return AgreementReport.objects.select_for_update().get_or_create(
        project=project, defaults={"computed_at": timezone.now(), "input_sha256": ""}
    )


def audit_report_lock(report_id: int) -> AuditReport | None:
    """Lock and return an audit report, or None when it no longer exists."""
    return AuditReport.objects.select_for_update().filter(pk=report_id).first()


def reliability_report_lock(project: Project) -> tuple[ReliabilityReport, bool]:
    """Lock and return the project's reliability report, creating it if needed.

    As :func:`agreement_report_lock`: a new report has an empty ``input_sha256``.

    Returns:
        The report and whether it was created.
    """
    return ReliabilityReport.objects.select_for_update().get_or_create(
        project=project, defaults={"computed_at": timezone.now(), "input_sha256": ""}
    )


def calibration_spec_lock(spec_id: int) -> CalibrationSpec:
    """Lock and return a calibration spec row, read afresh.

    Raises:
        CalibrationSpec.DoesNotExist: no such spec.
    """
    return CalibrationSpec.objects.select_for_update().get(pk=spec_id)


def release_build_lock(build_id: int, *, with_release: bool = False) -> ReleaseBuild | None:
    """Lock and return a release build row, or None if there is none.

    ``with_release`` loads the build's release with its project, policy and parent (not
    locked), for the build task.
    """
    builds = ReleaseBuild.objects.select_for_update(of=("self",)).filter(pk=build_id)
    if with_release:
        builds = builds.select_related("release__project", "release__policy", "release__parent")
    return builds.first()


def release_freeze_lock(project_id: int) -> None:
    """Take the project's label-write lock exclusive, for a release freeze (PostgreSQL only).

    ``pg_advisory_xact_lock(LABEL_WRITES_NAMESPACE, project_id)``, held until the transaction
    ends. It waits for the project's label transactions in flight (each holds the key shared,
    :func:`labeling.locks.project_label_writes_lock`, from before its first pinned row got its
    id) and keeps new ones waiting until ours commits. So once it is granted, every row of the
    project is committed or will get an id from a sequence later than now: the largest id of
    the project read afterwards has no smaller id of the project committing after it. Other
    projects' keys are not touched. On SQLite writers are serialised (IMMEDIATE transactions).

    Raises:
        ValueError: ``project_id`` does not fit PostgreSQL's 32-bit advisory key.
    """
    if connection.vendor != "postgresql":
        return
    if not 0 < project_id < 2**31:
        raise ValueError(f"project id {project_id} does not fit a 32-bit advisory lock key")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [LABEL_WRITES_NAMESPACE, project_id])
