"""A release's cutoff under concurrency (PostgreSQL): no label committed later can fall below it.

Ids come from sequences, so a transaction can hold a smaller id than one already committed. A
freeze that read ``max(id)`` while such a transaction was open would pin a cutoff that the
late row then falls under, and a rebuild would no longer match. ``release_freeze`` takes the
project's label-write lock exclusive first, which waits for the project's open writers (a plain
INSERT takes the lock shared through a trigger): the freeze below must wait for the slow writer
and include its row.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.db import connection, connections, transaction

from certification.models import BuildStatus
from certification.selectors import release_content_build
from certification.services.releases import files as files_module
from certification.services.releases import (
    records,
    release_export,
    release_freeze,
    release_rebuild,
)
from labeling.models import Item, LabelPolicy, Membership, Resolution, Role
from labeling.services import membership_set
from tests.conftest import native_record
from tests.factories import UserFactory

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="SQLite serialises writers: nothing to race"
    ),
]

WRITER_HOLDS_SECONDS = 1.5


def test_freeze_waits_for_an_open_label_transaction_and_pins_its_row(
    project, import_records, tmp_path
):
    import_records([native_record("q1"), native_record("q2")])
    manager, adjudicator = UserFactory(), UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    membership_set(project=project, user=adjudicator, role=Role.ADJUDICATOR)
    item = Item.objects.filter(project=project).order_by("pk").first()
    policy = LabelPolicy.objects.get(project=project)
    inserted, written = threading.Event(), {}

    def slow_writer() -> None:
        try:
            with transaction.atomic():
                resolution = Resolution.objects.create(
                    item=item,
                    number=1,
                    status="unresolved",
                    unresolved_reason="other",
                    rationale="written by a slow transaction",
                    policy=policy,
                    adjudicator=adjudicator,
                )
                written["id"] = resolution.pk
                inserted.set()
                time.sleep(WRITER_HOLDS_SECONDS)
        finally:
            connections.close_all()

    writer = threading.Thread(target=slow_writer)
    writer.start()
    assert inserted.wait(10)
    started = time.monotonic()
    release = release_freeze(project=project, actor=manager, version="1")
    waited = time.monotonic() - started
    writer.join()

    assert waited >= WRITER_HOLDS_SECONDS * 0.5, "the freeze did not wait for the open writer"
    assert release.cutoff["resolution"] >= written["id"]
    build = release_content_build(release)
    assert build.status == BuildStatus.DONE, build.error
    directory = release_export(release=release, directory=tmp_path)
    records = [json.loads(line) for line in (directory / "labels.jsonl").read_bytes().splitlines()]
    resolved = [r["resolution"] for r in records if r["resolution"] is not None]
    assert [r["rationale"] for r in resolved] == ["written by a slow transaction"]


def test_read_ahead_thread_gives_the_same_bytes_as_one_connection(
    project, import_records, monkeypatch
):
    # Committed data (no test transaction here): the first build reads ahead on a second
    # connection; the rebuild reads on one connection only and must match byte for byte.
    import_records([native_record(f"q{n}") for n in range(5)])
    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    monkeypatch.setattr(records, "CHUNK", 3)  # several chunks, so the thread reads ahead
    used: list[bool] = []
    original = records.ReleaseReader.records

    def spy(self, ids, *, prefetch=False):
        used.append(prefetch)
        return original(self, ids, prefetch=prefetch)

    monkeypatch.setattr(records.ReleaseReader, "records", spy)
    release = release_freeze(project=project, actor=manager, version="1")
    monkeypatch.setattr(files_module, "prefetch_possible", lambda: False)
    rebuild = release_rebuild(release=release, actor=manager)
    rebuild.refresh_from_db()
    assert used == [True, False]
    assert rebuild.status == BuildStatus.DONE, rebuild.error
    assert rebuild.matches is True, rebuild.mismatches


def test_a_freeze_and_a_labelling_transaction_do_not_deadlock(project, import_records):
    # The labelling transaction writes a label, then inserts a row pointing at the project
    # (its foreign key check locks the project row FOR KEY SHARE) while the freeze waits for
    # the project's label-write lock: the freeze holds nothing then, so there is no deadlock.
    import_records([native_record("q1")])
    manager, annotator = UserFactory(), UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    item = Item.objects.filter(project=project).first()
    policy = LabelPolicy.objects.get(project=project)
    wrote_label, failures = threading.Event(), []

    def labelling() -> None:
        try:
            with transaction.atomic():
                Resolution.objects.create(
                    item=item,
                    number=1,
                    status="unresolved",
                    unresolved_reason="other",
                    rationale="x",
                    policy=policy,
                    adjudicator=manager,
                )
                wrote_label.set()
                time.sleep(0.5)  # the freeze takes the project row meanwhile
                Membership.objects.create(project=project, user=annotator, role=Role.ANNOTATOR)
        except Exception as exc:  # noqa: BLE001 - the test reports whatever failed
            failures.append(exc)
        finally:
            connections.close_all()

    writer = threading.Thread(target=labelling)
    writer.start()
    assert wrote_label.wait(10)
    release = release_freeze(project=project, actor=manager, version="1")
    writer.join()

    assert failures == []
    assert release.cutoff["resolution"] >= Resolution.objects.get(item=item).pk
