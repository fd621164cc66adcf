"""``manage.py demo_setup``: idempotent, DEBUG only, and its printed password works."""

from __future__ import annotations

import io
import logging
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from labeling.models import (
    Annotation,
    CandidateAnswer,
    Disagreement,
    Item,
    ItemStatus,
    Membership,
    Project,
    Question,
    SourceVersion,
)

pytestmark = pytest.mark.django_db


def run_demo_setup() -> str:
    out = io.StringIO()
    call_command("demo_setup", stdout=out, stderr=io.StringIO())
    return out.getvalue()


def counts() -> dict[str, object]:
    project = Project.objects.get(slug="demo")
    return {
        "questions": Question.objects.filter(project=project).count(),
        "candidates": CandidateAnswer.objects.filter(question__project=project).count(),
        "source_versions": SourceVersion.objects.filter(document__project=project).count(),
        "users": get_user_model().objects.count(),
        "roles": sorted(
            Membership.objects.filter(project=project).values_list("user__username", "role")
        ),
        "partitions": sorted(
            Question.objects.filter(project=project).values_list("external_id", "partition")
        ),
        "seed": project.partition_seed,
    }


def printed_password(output: str) -> str:
    match = re.search(r"^\s*password\s+(\S+)\s*$", output, re.MULTILINE)
    assert match, output
    return match.group(1)


def test_running_twice_creates_the_demo_once(settings):
    # given DEBUG on (pytest-django turns it off by default)
    settings.DEBUG = True
    # when demo_setup runs twice
    run_demo_setup()
    first = counts()
    second_output = run_demo_setup()
    # then the second run creates nothing and the whole sample was imported the first time
    assert counts() == first
    assert "already imported" in second_output
    assert first["questions"] == 12
    assert first["source_versions"] == 9  # 8 documents, one seen in two revisions
    assert first["roles"] == [
        ("adjudicator", "adjudicator"),
        ("annotator1", "annotator"),
        ("annotator2", "annotator"),
        ("manager", "manager"),
    ]
    assert {partition for _, partition in first["partitions"]} == {"dev", "calibration", "test"}


def test_printed_password_logs_every_demo_user_in(settings, client):
    settings.DEBUG = True
    password = printed_password(run_demo_setup())
    for username in ("admin", "manager", "annotator1", "annotator2", "adjudicator"):
        assert client.login(username=username, password=password), username
        client.logout()
    assert get_user_model().objects.get(username="admin").is_superuser


def test_questions_sharing_a_source_land_in_one_partition(settings):
    settings.DEBUG = True
    run_demo_setup()
    project = Project.objects.get(slug="demo")
    partitions = {
        question.partition
        for question in Question.objects.filter(
            project=project,
            retrievals__source_version__document__key="quillfeather-travel-policy",
        )
    }
    assert len(partitions) == 1


def test_refuses_to_run_with_debug_off(settings):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DJANGO_DEBUG"):
        run_demo_setup()
    assert not Project.objects.filter(slug="demo").exists()


def test_demo_opens_with_consensus_a_queue_and_agreement_figures(settings, client):
    # given the demo set up
    settings.DEBUG = True
    run_demo_setup()
    project = Project.objects.get(slug="demo")
    # then labelling has started, the sample labels produced two consensus items and two
    # disagreements (one at answer level, one at claim level), each from both annotators
    assert project.labelling_started_at is not None
    resolved = Item.objects.filter(project=project, status=ItemStatus.RESOLVED)
    assert sorted(
        f"{i.candidate.question.external_id}/{i.candidate.key}:{i.resolution.status}"
        for i in resolved
    ) == ["lib-005/a:consensus", "qf-001/b:consensus"]
    queue = Disagreement.objects.filter(item__project=project, closed_at__isnull=True)
    assert sorted(
        (d.item.candidate.question.external_id, d.answer_differs, d.claims_differ) for d in queue
    ) == [("lib-005", False, True), ("qf-001", True, False)]
    annotators = Annotation.objects.filter(item__project=project).values_list(
        "annotator__username", flat=True
    )
    assert sorted(set(annotators)) == ["annotator1", "annotator2"] and len(annotators) == 8
    # differing evidence under equal labels is kept, not a disagreement
    lib = resolved.get(candidate__key="a", candidate__question__external_id="lib-005")
    printing = lib.resolution.claim_labels.get(claim__index=1)
    assert sorted(e.quote for e in printing.evidence.all()) == [
        "1 crown per 10 grams",
        "Printing costs 1 crown per 10 grams of filament.",
    ]
    # and the adjudicator's queue page lists both items
    client.login(username="adjudicator", password="certlabel-demo")
    page = client.get(f"/p/{project.slug}/adjudicate/")
    assert page.status_code == 200
    for disagreement in queue:
        assert f"/p/demo/adjudicate/{disagreement.item_id}/".encode() in page.content


def test_the_demo_manager_may_create_projects_and_the_annotators_may_not(settings):
    from labeling.permissions import can_create_projects

    settings.DEBUG = True
    run_demo_setup()
    users = get_user_model().objects
    assert can_create_projects(users.get(username="manager"))
    assert not can_create_projects(users.get(username="annotator1"))
    assert not can_create_projects(users.get(username="adjudicator"))


def test_logs_nothing_below_warning_unless_verbose(settings, caplog):
    # given INFO records captured from every logger
    settings.DEBUG = True
    caplog.set_level(logging.INFO)
    # when the demo is set up at the default verbosity
    out = run_demo_setup()
    # then its summary is all it prints: no INFO line of the imports and tasks it runs
    assert "is ready" in out
    assert [r.getMessage() for r in caplog.records if r.levelno < logging.WARNING] == []
    # and logging is back on afterwards
    logging.getLogger("labeling").info("after")
    assert caplog.records[-1].getMessage() == "after"
