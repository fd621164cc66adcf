"""Project list and project overview pages, for every role."""

from __future__ import annotations

import pytest
from django.urls import reverse

from labeling.models import ImportBatch, Role
from labeling.services import partition_freeze, project_create
from tests.conftest import native_record

pytestmark = pytest.mark.django_db

ROLES = [Role.MANAGER, Role.ADJUDICATOR, Role.ANNOTATOR]


# --- project list ------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES)
def test_project_list_shows_member_projects_with_role_and_counts(login, import_records, role):
    # given a project with one question of two candidates, and another project
    import_records([native_record("q1")])
    project_create(slug="other-study", name="Other study")

    # when a member opens the project list
    response = login(role).get(reverse("project-list"))

    # then they see their project with role and counts, not the other one
    assert response.status_code == 200
    rows = response.context["rows"]
    assert [(p.slug, r) for p, r in rows] == [("study", role)]
    assert (rows[0][0].question_count, rows[0][0].item_count) == (1, 2)
    assert b"other-study" not in response.content


def test_project_list_is_empty_for_a_non_member(login, project):
    response = login("nonmember").get(reverse("project-list"))

    assert response.status_code == 200
    assert response.context["rows"] == []
    assert b"study" not in response.content.replace(b"certlabel", b"")


def test_staff_see_every_project_as_manager(login, project):
    project_create(slug="other-study", name="Other study")

    response = login("staff").get(reverse("project-list"))

    assert [(p.slug, r) for p, r in response.context["rows"]] == [
        ("other-study", Role.MANAGER),
        ("study", Role.MANAGER),
    ]


def test_project_list_redirects_anonymous_to_login(login):
    response = login("anonymous").get(reverse("project-list"))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


# --- project overview ------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES)
def test_overview_shows_counts_batches_and_policy(login, import_records, role):
    # given an import with one unanchored claim ("It spans the harbour." is not in the answer)
    record = native_record("q1")
    record["candidates"][0]["text"] = "It opened in 1932."
    import_records([record, native_record("q2")])

    # when a member opens the overview
    response = login(role).get(reverse("project-detail", args=["study"]))

    # then counts are per partition (all unassigned before the freeze) and the batch is listed
    assert response.status_code == 200
    overview = response.context["overview"]
    unassigned = {r.partition: r for r in overview.partitions}["unassigned"]
    assert (unassigned.questions, unassigned.candidates, unassigned.items) == (2, 4, 4)
    assert (unassigned.claims, unassigned.unanchored_claims) == (4, 1)
    assert unassigned.source_versions == 2
    assert overview.unanchored_claims == 1
    assert overview.policy_version == 1
    assert overview.evidence_relation == "source_relative"
    content = response.content.decode()
    # batch reports count other people's labels: managers only
    assert ("test.jsonl" in content) == (role == Role.MANAGER)
    assert "1 unanchored claim" in content
    assert "not frozen" in content


def test_overview_shows_frozen_partition_status(login, project, import_records):
    import_records([native_record("q1"), native_record("q2")])
    partition_freeze(project=project, proportions={"dev": 0, "calibration": 0, "test": 1}, seed=7)

    response = login(Role.ADJUDICATOR).get(reverse("project-detail", args=["study"]))

    overview = response.context["overview"]
    assert overview.partition_seed == 7
    rows = {r.partition: r for r in overview.partitions}
    assert (rows["test"].questions, rows["unassigned"].questions) == (2, 0)
    assert "frozen at" in response.content.decode()


def test_overview_shows_manager_links_to_managers_only(login, project):
    import_url = reverse("import-create", args=["study"]).encode()
    partition_url = reverse("partition-freeze", args=["study"]).encode()

    as_manager = login(Role.MANAGER).get(reverse("project-detail", args=["study"]))
    as_adjudicator = login(Role.ADJUDICATOR).get(reverse("project-detail", args=["study"]))

    assert import_url in as_manager.content and partition_url in as_manager.content
    assert import_url not in as_adjudicator.content
    assert partition_url not in as_adjudicator.content


def test_overview_lists_adapter_notes_of_a_batch(login, project, import_records):
    result = import_records([native_record("q1")])
    ImportBatch.objects.filter(pk=result.batch.pk).update(
        report={**result.batch.report, "notes": {"skipped_blank_answers": 3}}
    )

    response = login(Role.MANAGER).get(reverse("project-detail", args=["study"]))

    assert "skipped_blank_answers: 3" in response.content.decode()


@pytest.mark.parametrize("slug", ["study", "no-such-project"])
def test_overview_is_404_for_non_member_whether_or_not_it_exists(login, project, slug):
    response = login("nonmember").get(reverse("project-detail", args=[slug]))

    assert response.status_code == 404


def test_overview_redirects_anonymous_to_login(login, project):
    response = login("anonymous").get(reverse("project-detail", args=["study"]))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_overview_page_queries_do_not_grow_with_rows(
    login, import_records, django_assert_max_num_queries
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = login(Role.MANAGER)
    import_records([native_record("q1")])
    with CaptureQueriesContext(connection) as small:
        client.get(reverse("project-detail", args=["study"]))
    small_queries = len(small)  # now: the log is reset by later requests and imports
    for batch in range(3):
        import_records([native_record(f"b{batch}-{i}") for i in range(10)])

    with django_assert_max_num_queries(small_queries):
        response = client.get(reverse("project-detail", args=["study"]))
    assert len(response.context["overview"].batches) == 4


@pytest.mark.parametrize("role", [Role.ANNOTATOR, Role.ADJUDICATOR])
def test_import_reports_with_label_counts_are_shown_to_managers_only(login, import_records, role):
    # a batch report counts evaluator labels and prior labels: a summary of labels others made
    record = native_record("q1")
    record["candidates"][0]["evaluator_labels"] = [
        {"evaluator": "judge-x", "version": "1", "label": "admissible"}
    ]
    import_records([record])
    page = login(role).get(reverse("project-detail", args=["study"]))
    assert page.status_code == 200
    assert b"evaluator_labels" not in page.content and b"Import batches" not in page.content
    api = login(role).get("/api/projects/study/")
    assert api.json()["batches"] == []
    manager = login(Role.MANAGER).get(reverse("project-detail", args=["study"]))
    assert b"evaluator_labels" in manager.content
