"""``manage.py demo_setup``: idempotent, DEBUG only, and its printed password works."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from labeling.models import CandidateAnswer, Membership, Project, Question, SourceVersion

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
