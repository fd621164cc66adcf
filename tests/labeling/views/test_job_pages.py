"""Job pages: a large upload or start redirects to a page with a progress bar and the outcome."""

from __future__ import annotations

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from labeling.models import Job, JobStatus, Question, Role
from tests.conftest import jsonl_bytes, native_record

pytestmark = pytest.mark.django_db


def upload(data: bytes, name: str = "work.jsonl") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/x-ndjson")


@pytest.fixture
def background(settings):
    settings.JOB_IMPORT_BYTES = 10
    settings.JOB_START_ITEMS = 1


def test_a_large_upload_redirects_to_the_job_page_which_shows_it_done(
    login, project, background, django_capture_on_commit_callbacks
):
    client = login(Role.MANAGER)
    data = jsonl_bytes([native_record("q1"), native_record("q2")])

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/p/study/import/", {"file": upload(data), "format": "native"})

    job = Job.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/p/study/jobs/{job.pk}/"
    page = client.get(response["Location"])
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="job-progress" value="100" max="100"' in html
    assert '<strong id="job-state" data-work-field="status">done</strong>' in html
    assert f"Batch #{job.result['batch']}, 2 records." in html
    assert re.search(r"<td>questions</td><td>2</td>", html)
    # a finished job's page neither reloads nor asks for the job
    assert 'http-equiv="refresh"' not in html and "data-poll-url" not in html
    assert re.findall(r"<script[^>]*>", html) == [
        '<script src="/static/labeling/layout.js" defer>',
        '<script src="/static/labeling/keys.js" defer>',
    ]  # only the layout's and the global keys' scripts
    assert Question.objects.count() == 2


def test_a_job_still_running_updates_its_progress_in_place(login, project, member):
    job = Job.objects.create(
        project=project,
        kind="workload_import",
        actor=member(Role.MANAGER),
        progress_total=400,
        progress_done=100,
        message="import of big.jsonl",
    )
    Job.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING)

    html = login(Role.MANAGER).get(f"/p/study/jobs/{job.pk}/").content.decode()

    assert 'http-equiv="refresh"' not in html
    assert (
        f'data-poll-url="/api/projects/study/jobs/{job.pk}/" data-poll-ms="2000"' in html
        and '<script src="/static/labeling/work_progress.js" defer>' in html
    )
    assert 'id="job-progress" value="25" max="100"' in html
    assert "100 of 400 bytes" in html
    assert "import of big.jsonl" in html


def test_a_failed_import_job_lists_every_error_with_line_and_field(
    login, project, background, django_capture_on_commit_callbacks
):
    bad = native_record("q2")
    bad["candidates"][0]["claims"][0]["end"] = 999
    data = jsonl_bytes([native_record("q1"), bad]) + b"[1, 2]\n"
    client = login(Role.MANAGER)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/p/study/import/", {"file": upload(data), "format": "native"})

    html = client.get(response["Location"]).content.decode()
    assert '<strong id="job-state" data-work-field="status">failed</strong>' in html
    assert "Nothing was written." in html
    rows = re.findall(r'<tr><td>(line \d+)</td><td class="mono">([^<]*)</td>', html)
    assert rows == [("line 2", "candidates[0].claims[0]"), ("line 3", "(line)")]
    assert not Question.objects.exists()


def test_starting_labelling_on_a_large_project_goes_through_a_job(
    login, project, import_records, background, django_capture_on_commit_callbacks
):
    import_records([native_record("q1")])
    client = login(Role.MANAGER)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/p/study/settings/start/")

    job = Job.objects.get(kind="labelling_start")
    assert response["Location"] == f"/p/study/jobs/{job.pk}/"
    html = client.get(response["Location"]).content.decode()
    assert '<strong id="job-state" data-work-field="status">done</strong>' in html
    assert "on 2 items" in html
    project.refresh_from_db()
    assert project.labelling_started_at is not None


def test_the_job_list_links_each_job(login, project, member):
    job = Job.objects.create(project=project, kind="labelling_start", actor=member(Role.MANAGER))
    html = login(Role.MANAGER).get("/p/study/jobs/").content.decode()
    assert f'href="/p/study/jobs/{job.pk}/">#{job.pk}</a>' in html
    assert "start labelling" in html


@pytest.mark.parametrize(
    ("role", "status"),
    [
        (Role.MANAGER, 200),
        (Role.ADJUDICATOR, 403),
        (Role.ANNOTATOR, 403),
        ("nonmember", 404),
        ("anonymous", 302),
    ],
)
def test_job_pages_are_for_managers(login, project, member, role, status):
    job = Job.objects.create(project=project, kind="labelling_start", actor=member(Role.MANAGER))
    assert login(role).get(f"/p/study/jobs/{job.pk}/").status_code == status
    assert login(role).get("/p/study/jobs/").status_code == status
