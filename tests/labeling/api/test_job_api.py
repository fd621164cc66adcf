"""Background jobs through the API: 202 and the job's URL, polling it, results and errors."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from labeling.models import ImportBatch, Item, Job, JobStatus, Project, Question, Role
from labeling.services import project_create
from tests.conftest import jsonl_bytes, native_record

pytestmark = pytest.mark.django_db

IMPORTS = "/api/projects/study/imports/"
JOBS = "/api/projects/study/jobs/"


def upload(data: bytes, name: str = "work.jsonl") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/x-ndjson")


def records(n: int) -> bytes:
    return jsonl_bytes([native_record(f"q{i}") for i in range(1, n + 1)])


@pytest.fixture
def background(settings):
    """Every upload above 10 bytes and every start above 1 item runs as a job."""
    settings.JOB_IMPORT_BYTES = 10
    settings.JOB_START_ITEMS = 1


def poll(client, url: str, limit: int = 20) -> dict:
    """GET the job until it has finished (eager Celery: it already has)."""
    for _ in range(limit):
        body = client.get(url).json()
        if body["status"] in ("done", "failed"):
            return body
    raise AssertionError(f"job at {url} did not finish: {body}")


def test_a_large_import_answers_202_with_the_job_and_its_result_equals_a_synchronous_one(
    api, project, background, settings, django_capture_on_commit_callbacks
):
    data = records(3)
    client = api(Role.MANAGER)

    # when a manager uploads a file above the threshold
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(IMPORTS, {"file": upload(data)}, format="multipart")

    # then the answer is 202 with the job, its URL also in Location
    assert response.status_code == 202
    job = Job.objects.get()
    body = response.json()
    assert body["id"] == job.pk
    assert body["kind"] == "workload_import"
    assert body["url"] == f"{JOBS}{job.pk}/"
    assert response["Location"] == body["url"]
    assert body["progress_total"] == len(data)
    # and polling the resource finds it done with the import's counts
    done = poll(client, body["url"])
    assert done["status"] == "done"
    assert done["percent"] == 100
    assert done["progress_done"] == len(data)
    assert done["error"] is None
    assert done["result"]["batch"] == ImportBatch.objects.get(project=project).pk
    assert Question.objects.filter(project=project).count() == 3

    # and the result equals a synchronous import of the same file into a twin project
    project_create(slug="twin", name="Twin")
    twin = Project.objects.get(slug="twin")
    from labeling.services import membership_set

    membership_set(project=twin, user=job.actor, role=Role.MANAGER)
    settings.JOB_IMPORT_BYTES = 10**9
    sync = client.post("/api/projects/twin/imports/", {"file": upload(data)}, format="multipart")
    assert sync.status_code == 201
    expected = sync.json()
    assert {k: v for k, v in done["result"].items() if k != "batch"} == {
        k: v for k, v in expected.items() if k != "batch"
    }
    assert done["result"]["created"]["questions"] == 3


def test_a_large_invalid_import_fails_with_every_error_naming_line_and_field(
    api, project, background, django_capture_on_commit_callbacks
):
    bad = native_record("q2")
    bad["candidates"][0]["claims"][0]["end"] = 999
    data = jsonl_bytes([native_record("q1"), bad]) + b"[1, 2]\n"
    client = api(Role.MANAGER)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(IMPORTS, {"file": upload(data)}, format="multipart")

    assert response.status_code == 202
    body = poll(client, response["Location"])
    assert body["status"] == "failed"
    assert body["result"] is None
    assert body["error"]["code"] == "import_failed"
    assert "nothing was written" in body["error"]["detail"]
    assert [(e["location"], e["field"]) for e in body["error"]["errors"]] == [
        ("line 2", "candidates[0].claims[0]"),
        ("line 3", "(line)"),
    ]
    assert not Question.objects.exists()
    assert not ImportBatch.objects.exists()


def test_a_small_import_stays_synchronous(api, project, background, settings):
    settings.JOB_IMPORT_BYTES = 10**9
    response = api(Role.MANAGER).post(IMPORTS, {"file": upload(records(1))}, format="multipart")
    assert response.status_code == 201
    assert not Job.objects.exists()


def test_starting_labelling_on_a_large_project_answers_202_and_the_job_starts_it(
    api, project, import_records, background, django_capture_on_commit_callbacks
):
    import_records([native_record("q1"), native_record("q2")])
    client = api(Role.MANAGER)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/api/projects/study/labelling/start/")

    assert response.status_code == 202
    body = poll(client, response["Location"])
    assert (body["kind"], body["status"]) == ("labelling_start", "done")
    project.refresh_from_db()
    assert project.labelling_started_at is not None
    assert body["result"]["items"] == 4
    assert (body["progress_done"], body["progress_total"]) == (4, 4)
    assert sorted(Item.objects.values_list("queue_position", flat=True)) == [1, 2, 3, 4]
    # and a second start is refused at once (409), not queued
    again = client.post("/api/projects/study/labelling/start/")
    assert again.status_code == 409
    assert Job.objects.count() == 1


def test_the_job_list_shows_the_projects_jobs_newest_first(
    api, project, background, django_capture_on_commit_callbacks
):
    client = api(Role.MANAGER)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(IMPORTS, {"file": upload(records(1))}, format="multipart")
        client.post(IMPORTS, {"file": upload(records(2), "b.jsonl")}, format="multipart")

    body = client.get(JOBS).json()

    ids = list(Job.objects.order_by("-pk").values_list("pk", flat=True))
    assert [j["id"] for j in body["results"]] == ids
    assert [j["status"] for j in body["results"]] == ["done", "done"]
    assert body["count"] == 2


@pytest.mark.parametrize(
    ("role", "status"),
    [
        (Role.MANAGER, 200),
        (Role.ADJUDICATOR, 403),
        (Role.ANNOTATOR, 403),
        ("nonmember", 404),
        ("anonymous", 401),
    ],
)
def test_jobs_are_for_managers_only(api, project, member, role, status):
    job = Job.objects.create(project=project, kind="labelling_start", actor=member(Role.MANAGER))
    assert api(role).get(f"{JOBS}{job.pk}/").status_code == status
    assert api(role).get(JOBS).status_code == status


def test_a_job_of_another_project_or_an_unknown_id_is_404_naming_the_field(api, project, member):
    other = project_create(slug="other", name="Other")
    job = Job.objects.create(project=other, kind="labelling_start")

    response = api(Role.MANAGER).get(f"{JOBS}{job.pk}/")

    assert response.status_code == 404
    assert response.json()["field"] == "job_id"
    assert str(job.pk) in response.json()["detail"]
    assert JobStatus.PENDING == Job.objects.get(pk=job.pk).status


def test_the_job_list_is_documented_as_the_page_it_answers():
    # the list answers {count, next, previous, results}: its schema must say so (schemathesis
    # found the earlier "array" answer)
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    operation = schema["paths"]["/api/projects/{slug}/jobs/"]["get"]
    ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok["$ref"] == "#/components/schemas/PaginatedJobList"
    page = schema["components"]["schemas"]["PaginatedJobList"]
    assert {"count", "next", "previous", "results"} <= set(page["properties"])
    assert {p["name"] for p in operation["parameters"]} >= {"limit", "offset"}
