"""A release freeze and other projects' writes (PostgreSQL): neither waits for the other.

A freeze takes its project's label-write lock exclusive (``certification.locks.
release_freeze_lock``); label writers take it shared (``labeling.locks.
project_label_writes_lock``). Two real connections (threads) race here: a freeze in project A
and an import or label writes in project B never wait for each other, and inside A a write
started during the freeze waits only for the freeze. Each "under 1 s" is measured while the
other transaction is still open.
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection, connections, transaction
from rest_framework.test import APIClient

from certification.locks import release_freeze_lock
from certification.models import BuildStatus
from certification.selectors import release_content_build
from certification.services.releases import freeze as freeze_module
from certification.services.releases import release_export, release_freeze
from certification.services.releases.build import RELEASE_BUILD
from labeling import engine
from labeling.importers.native import read_jsonl
from labeling.locks import LABEL_WRITES_NAMESPACE
from labeling.models import (
    AnnotationRevision,
    Item,
    LabelPolicy,
    Project,
    Question,
    Resolution,
    Role,
)
from labeling.services import (
    adjudication_mark_unresolved,
    annotation_submit,
    item_claim_next,
    membership_set,
    project_create,
    project_labelling_configure,
    project_labelling_start,
    workload_import,
)
from labeling.services.imports import fingerprint
from tests.conftest import jsonl_bytes, native_record
from tests.factories import UserFactory
from tests.worlds import own_labels

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="SQLite serialises writers: nothing to race"
    ),
]

# How long the other transaction stays open; every "did not wait" bound is far below it.
HOLD_SECONDS = 5.0
NO_WAIT_SECONDS = 1.0


class Team:
    """A project with labelling started, its manager, adjudicator and two annotators."""

    def __init__(self, slug: str, import_records: Callable[..., Any]) -> None:
        self.manager, self.adjudicator = UserFactory(), UserFactory()
        self.annotators = [UserFactory(), UserFactory()]
        self.project: Project = project_create(slug=slug, name=slug, manager=self.manager)
        membership_set(project=self.project, user=self.adjudicator, role=Role.ADJUDICATOR)
        for user in self.annotators:
            membership_set(project=self.project, user=user, role=Role.ANNOTATOR)
        import_records([native_record(f"{slug}-q{n}") for n in range(3)], target=self.project)
        project_labelling_configure(project=self.project, actor=self.manager, overlap=2)
        project_labelling_start(project=self.project, actor=self.manager)

    def submit(self, annotator: int = 0) -> AnnotationRevision:
        """Claim the next item and submit labels for it (the real services)."""
        user = self.annotators[annotator]
        assignment = item_claim_next(project=self.project, actor=user)
        assert assignment is not None
        item = Item.objects.select_related("candidate").get(pk=assignment.item_id)
        annotation = annotation_submit(
            project=self.project, assignment_id=assignment.pk, actor=user, data=own_labels(item)
        )
        return annotation.revisions.get()


def _questions(team: Team) -> list[str]:
    """The external ids of the team's questions, sorted."""
    ids = Question.objects.filter(project=team.project).values_list("external_id", flat=True)
    return sorted(ids)


def _release_questions(release: Any, directory: Any) -> list[str]:
    """The question ids of a built release's labels.jsonl, sorted and distinct."""
    exported = release_export(release=release, directory=directory)
    lines = (exported / "labels.jsonl").read_bytes().splitlines()
    return sorted({json.loads(line)["question"]["id"] for line in lines})


def _records(slug: str, count: int) -> bytes:
    return jsonl_bytes([native_record(f"{slug}-{n}") for n in range(count)])


def _committed_at(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the moment each freeze transaction commits (before its build runs)."""
    moments: list[float] = []
    original = engine.send

    def send(kind_name: str, pk: int) -> None:
        if kind_name == RELEASE_BUILD:
            transaction.on_commit(lambda: moments.append(time.monotonic()))
        original(kind_name, pk)

    monkeypatch.setattr(engine, "send", send)
    return moments


class PausedFreeze:
    """A freeze of ``team``'s project in a thread, held open after its locks and cutoff."""

    def __init__(self, team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
        self.inside, self.go_on = threading.Event(), threading.Event()
        self.result: dict[str, Any] = {}
        self.committed = _committed_at(monkeypatch)
        original = freeze_module._report_snapshot

        def paused(*args: Any, **kwargs: Any) -> Any:
            self.inside.set()
            assert self.go_on.wait(30)
            return original(*args, **kwargs)

        monkeypatch.setattr(freeze_module, "_report_snapshot", paused)

        def run() -> None:
            try:
                self.result["release"] = release_freeze(
                    project=team.project, actor=team.manager, version="1"
                )
            except Exception as exc:  # noqa: BLE001 - the test reports whatever failed
                self.result["error"] = exc
            finally:
                connections.close_all()

        self.thread = threading.Thread(target=run)

    def __enter__(self) -> PausedFreeze:
        self.thread.start()
        assert self.inside.wait(10), self.result
        return self

    def __exit__(self, *exc: object) -> None:
        self.go_on.set()
        self.thread.join(30)

    @property
    def open(self) -> bool:
        """Whether the freeze transaction is still open (paused, not committed)."""
        return self.inside.is_set() and not self.go_on.is_set() and not self.committed


class OpenTransaction:
    """Run ``work`` in a thread inside one transaction, then keep it open until released."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self.ready, self.go_on, self.closed = threading.Event(), threading.Event(), False
        self.result: dict[str, Any] = {}

        def run() -> None:
            try:
                with transaction.atomic():
                    self.result["value"] = work()
                    self.ready.set()
                    self.go_on.wait(HOLD_SECONDS)
            except Exception as exc:  # noqa: BLE001 - the test reports whatever failed
                self.result["error"] = exc
            finally:
                self.closed = True
                self.ready.set()
                connections.close_all()

        self.thread = threading.Thread(target=run)

    def __enter__(self) -> OpenTransaction:
        self.thread.start()
        assert self.ready.wait(30)
        assert "error" not in self.result, self.result["error"]
        return self

    def __exit__(self, *exc: object) -> None:
        self.go_on.set()
        self.thread.join(30)


@pytest.fixture
def teams(import_records: Callable[..., Any]) -> Iterator[tuple[Team, Team]]:
    """Projects A and B, both labelling."""
    yield Team("proj-a", import_records), Team("proj-b", import_records)


def _import(team: Team, data: bytes, name: str) -> Any:
    return workload_import(
        project=team.project,
        records=read_jsonl(io.BytesIO(data)),
        format="native",
        filename=name,
        file_sha256=fingerprint(data.decode("utf-8")),
        actor=team.manager,
    )


def test_a_freeze_in_a_does_not_wait_for_an_open_import_into_b(teams, monkeypatch, tmp_path):
    a, b = teams
    committed = _committed_at(monkeypatch)
    with OpenTransaction(lambda: _import(b, _records("b-late", 20), "late.jsonl")) as import_b:
        started = time.monotonic()
        release = release_freeze(project=a.project, actor=a.manager, version="1")
        took = committed[0] - started
        assert not import_b.closed, "the import into B ended before the freeze committed"
    assert "error" not in import_b.result, import_b.result.get("error")

    assert took < NO_WAIT_SECONDS, f"the freeze of A waited {took:.2f} s for B's import"
    assert _release_questions(release, tmp_path) == _questions(a)
    assert (
        Question.objects.filter(project=b.project, external_id__startswith="b-late").count() == 20
    )
    build = release_content_build(release)
    assert build.status == BuildStatus.DONE, build.error


def test_an_import_into_b_through_the_api_is_not_blocked_by_a_freeze_in_a(
    teams, monkeypatch, tmp_path
):
    a, b = teams
    client = APIClient()
    client.force_authenticate(b.manager)
    url = f"/api/projects/{b.project.slug}/imports/"

    def post(name: str) -> Any:
        data = SimpleUploadedFile(name, _records(name, 10), content_type="application/x-ndjson")
        return client.post(url, {"file": data}, format="multipart")

    started = time.monotonic()
    assert post("before").status_code == 201
    baseline = time.monotonic() - started  # the same import with no freeze anywhere
    with PausedFreeze(a, monkeypatch) as freeze:
        started = time.monotonic()
        response = post("during")
        took = time.monotonic() - started
        # The freeze stays open until this block ends: had the import waited for it, it
        # could not have answered here.
        assert freeze.open, "the freeze of A ended before the import into B answered"
    assert "error" not in freeze.result, freeze.result.get("error")

    assert response.status_code == 201, response.content
    assert response["Content-Type"] == "application/json"
    assert response.json()["created"]["questions"] == 10
    assert took < baseline + NO_WAIT_SECONDS, f"{took:.2f} s during A's freeze, {baseline:.2f} s"
    release = freeze.result["release"]
    assert release_content_build(release).status == BuildStatus.DONE
    assert _release_questions(release, tmp_path) == _questions(a)


def test_label_writes_in_b_are_not_blocked_by_a_freeze_in_a(teams, monkeypatch):
    a, b = teams
    # One item of B reaches its overlap with different votes and goes to the disagreement queue.
    first = b.submit(0)
    item = Item.objects.get(annotations__revisions=first)
    assignment = item_claim_next(project=b.project, actor=b.annotators[1])
    assert assignment is not None and assignment.item_id == item.pk
    annotation_submit(
        project=b.project,
        assignment_id=assignment.pk,
        actor=b.annotators[1],
        data=replace(own_labels(item), answer_label="abstained"),
    )
    item.refresh_from_db()
    assert item.status == "disagreement"

    started = time.monotonic()
    b.submit(1)
    baseline = time.monotonic() - started  # a submit with no freeze anywhere
    with PausedFreeze(a, monkeypatch) as freeze:
        started = time.monotonic()
        revision = b.submit(0)
        resolution = adjudication_mark_unresolved(
            project=b.project,
            item_id=item.pk,
            actor=b.adjudicator,
            expected_version=item.version,
            reason="other",
            rationale="decided while A froze",
        )
        took = time.monotonic() - started
        # Had either write waited for the freeze, it could not have returned in this block.
        assert freeze.open, "the freeze of A ended before B's writes returned"
    assert "error" not in freeze.result, freeze.result.get("error")

    bound = 2 * baseline + NO_WAIT_SECONDS
    assert took < bound, f"B's submit and adjudication took {took:.2f} s (a submit: {baseline:.2f})"
    assert AnnotationRevision.objects.filter(pk=revision.pk).exists()
    assert Resolution.objects.get(pk=resolution.pk).rationale == "decided while A froze"


def test_a_write_in_a_started_during_its_freeze_waits_only_for_the_freeze(teams, monkeypatch):
    a, _ = teams
    before = a.submit(0)
    done, written = threading.Event(), {}

    def submit() -> None:
        try:
            written["revision"] = a.submit(1)
        except Exception as exc:  # noqa: BLE001 - the test reports whatever failed
            written["error"] = exc
        finally:
            written["at"] = time.monotonic()
            done.set()
            connections.close_all()

    with PausedFreeze(a, monkeypatch) as freeze:
        writer = threading.Thread(target=submit)
        writer.start()
        assert not done.wait(1.0), "a submit in A went through while A's freeze was open"
    writer.join(30)
    assert "error" not in freeze.result, freeze.result.get("error")
    assert "error" not in written, written.get("error")

    waited_after_commit = written["at"] - freeze.committed[0]
    assert waited_after_commit < NO_WAIT_SECONDS, f"{waited_after_commit:.2f} s after the freeze"
    release = freeze.result["release"]
    assert before.pk <= release.cutoff["annotation_revision"] < written["revision"].pk


def test_a_freeze_and_an_import_into_another_project_do_not_deadlock(teams, monkeypatch):
    # The scenario that deadlocked with table locks: B's import writes label tables, A's freeze
    # runs, then the same import writes the label tables again before it commits.
    a, b = teams
    committed = _committed_at(monkeypatch)
    frozen, failures = threading.Event(), []

    def import_b() -> None:
        try:
            with transaction.atomic():
                _import(b, _records("b-one", 5), "one.jsonl")
                wrote.set()
                assert frozen.wait(HOLD_SECONDS)
                _import(b, _records("b-two", 5), "two.jsonl")
        except Exception as exc:  # noqa: BLE001 - the test reports whatever failed
            failures.append(exc)
        finally:
            connections.close_all()

    wrote = threading.Event()
    thread = threading.Thread(target=import_b)
    thread.start()
    assert wrote.wait(30)
    started = time.monotonic()
    release = release_freeze(project=a.project, actor=a.manager, version="1")
    took = committed[0] - started
    frozen.set()
    thread.join(30)

    assert failures == []
    assert took < NO_WAIT_SECONDS, f"the freeze of A waited {took:.2f} s for B's import"
    assert Question.objects.filter(project=b.project, external_id__startswith="b-").count() == 10
    assert release_content_build(release).status == BuildStatus.DONE


def _label_write_locks() -> list[tuple[int, str]]:
    """The label-write locks this connection holds: (project id, mode)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT objid, mode FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2"
            " AND classid = %s AND pid = pg_backend_pid() AND granted ORDER BY objid",
            [LABEL_WRITES_NAMESPACE],
        )
        return [(int(objid), mode) for objid, mode in cursor.fetchall()]


def test_an_insert_by_any_path_holds_its_projects_label_write_lock(teams):
    # The database backs the services' lock up: a plain INSERT takes it too (a trigger).
    a, b = teams
    item = Item.objects.filter(project=a.project).order_by("pk").first()
    with transaction.atomic():
        assert _label_write_locks() == []
        Resolution.objects.create(
            item=item,
            number=Resolution.objects.filter(item=item).count() + 1,
            status="unresolved",
            unresolved_reason="other",
            rationale="written outside the services",
            policy=LabelPolicy.objects.get(project=a.project),
            adjudicator=a.adjudicator,
        )
        held = _label_write_locks()
    assert held == [(a.project.pk, "ShareLock")]
    assert b.project.pk not in [project for project, _ in held]


def test_an_import_waiting_for_its_projects_freeze_holds_no_lock_on_the_project_row(teams):
    # The label-write lock comes before the project row (labeling/locks.py): an import that
    # waits for a freeze holds nothing the freeze takes next, so they cannot deadlock.
    a, _ = teams
    done, result = threading.Event(), {}

    def run() -> None:
        try:
            result["value"] = _import(a, _records("a-waiting", 3), "waiting.jsonl")
        except Exception as exc:  # noqa: BLE001 - the test reports whatever failed
            result["error"] = exc
        finally:
            done.set()
            connections.close_all()

    with OpenTransaction(lambda: release_freeze_lock(a.project.pk)) as freeze:
        thread = threading.Thread(target=run)
        thread.start()
        assert not done.wait(1.0), "the import into A did not wait for A's freeze lock"
        with transaction.atomic():
            # NOWAIT raises if the waiting import held the project row.
            Project.objects.select_for_update(nowait=True).get(pk=a.project.pk)
        assert not freeze.closed
    thread.join(30)
    assert "error" not in freeze.result, freeze.result.get("error")
    assert "error" not in result, result.get("error")
    assert result["value"].created["questions"] == 3
