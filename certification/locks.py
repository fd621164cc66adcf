"""The only row and table locks of the certification side (``labeling/locks.py`` has the rest).

Lock order across both apps. A transaction takes locks only in this order::

    Project (labeling.locks.project_lock)
      →  Membership  →  Item (ascending id when several)  →  Assignment rows of that item
      →  the release cutoff tables, SHARE mode (:func:`release_cutoff_tables_lock`)
      →  one kind of certification row: AgreementReport | CalibrationSpec | ReleaseBuild

A labelling transaction takes no certification lock. Freezing a release takes the project
(``FOR NO KEY UPDATE``, so labelling transactions' foreign-key checks still pass) and then the
SHARE table locks; rebuilding and moving tags take the project only. The certification row
locks (:func:`agreement_report_lock`, :func:`calibration_spec_lock`, :func:`release_build_lock`)
are taken by transactions that hold no labelling lock and take no lock afterwards, one kind per
transaction (a calibration refresh locks the project's latest spec versions in ascending id).
So no two transactions can wait in a cycle.

Every function here must be called inside ``transaction.atomic`` and evaluates its queryset at
once (a lazy ``select_for_update`` queryset locks nothing). On SQLite ``select_for_update`` is a
no-op and the table locks are skipped; there IMMEDIATE transactions serialise writers, and the
services' checks plus the database constraints are the guard.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection
from django.db.models import Model
from django.utils import timezone

from certification.models import AgreementReport, CalibrationSpec, ReleaseBuild
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


def release_cutoff_tables_lock(models: Iterable[type[Model]]) -> None:
    """Lock the tables of ``models`` in SHARE mode (PostgreSQL; nothing on other databases).

    SHARE waits for every transaction that inserted into them to end and keeps new inserts out
    until ours commits, so the largest committed id of each table read afterwards has no
    smaller id appearing later. SQLite serialises writers (IMMEDIATE transactions) already.
    """
    if connection.vendor != "postgresql":
        return
    tables = ", ".join(connection.ops.quote_name(model._meta.db_table) for model in models)
    with connection.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {tables} IN SHARE MODE")  # noqa: S608 - model tables
