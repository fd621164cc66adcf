"""The ``releases`` and ``jobs`` storages on an S3-compatible object store (a real moto server).

Several machines that share only PostgreSQL, Redis and an object store keep uploads waiting for
their job and built releases in the store (``CERTLABEL_S3_BUCKET``, labeling/settings.py). Here
a moto S3 server runs as its own process on a free port of 127.0.0.1; each test gets a new
bucket, and the two storages are configured by the settings module itself from the same
environment variables production sets. Checked: an upload that becomes a job is stored in the
bucket, imported by its job and deleted; a release is built into the bucket and every file
downloads (302 to a presigned URL, or streamed) byte for byte as its manifest says; a release
exported from the bucket verifies.

Without moto (or boto3, django-storages) the tests skip; ``CERTLABEL_REQUIRE_SERVICES=1`` turns
the skip into a failure.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import runpy
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from certification.models import Release, ReleaseBuild
from certification.services.releases import release_build_execute
from labeling.models import ImportBatch, Job, Question, Role
from labeling.release_format import ARCHIVE, MANIFEST, MEDIA_TYPES
from labeling.release_verify import verify_release
from tests.conftest import jsonl_bytes, native_record
from tests.worlds import World, token_for

REPO = Path(__file__).resolve().parents[1]
SETTINGS_FILE = REPO / "labeling" / "settings.py"
#: Seconds the moto server may take to answer after it starts.
START_SECONDS = 30.0
#: Credentials moto accepts (any); region where a bucket needs no location constraint.
ACCESS_KEY, SECRET_KEY, REGION = "testing", "testing", "us-east-1"


def _missing() -> str | None:
    """Why the tests cannot run here, or None."""
    for module in ("moto", "flask", "boto3", "storages"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install -e '.[dev]' installs moto[server])"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def moto_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A moto S3 server process on 127.0.0.1, for the module; its URL."""
    reason = _missing()
    if reason is not None:
        if os.environ.get("CERTLABEL_REQUIRE_SERVICES") == "1":
            pytest.fail(
                f"CERTLABEL_REQUIRE_SERVICES=1 but the object store tests cannot run: {reason}"
            )
        pytest.skip(reason)
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            assert server.poll() is None, f"moto server exited:\n{log.read_text()}"
            try:
                with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2):
                    break
            except urllib.error.HTTPError:
                break  # it answers
            except OSError:
                assert time.monotonic() < deadline, f"moto did not answer:\n{log.read_text()}"
                time.sleep(0.2)
        yield endpoint
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def configured_settings(monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]) -> dict[str, Any]:
    """The settings module's names as it computes them with ``environ`` added to the env."""
    with monkeypatch.context() as patched:
        for name in [n for n in os.environ if n.startswith("CERTLABEL_S3_")]:
            patched.delenv(name)
        for name, value in environ.items():
            patched.setenv(name, value)
        return runpy.run_path(str(SETTINGS_FILE))


@dataclass
class Bucket:
    """The test's bucket and a boto3 client of the moto server."""

    name: str
    client: Any
    endpoint: str

    def keys(self, prefix: str = "") -> set[str]:
        listed = self.client.list_objects_v2(Bucket=self.name, Prefix=prefix)
        return {entry["Key"] for entry in listed.get("Contents", [])}

    def read(self, key: str) -> bytes:
        body: bytes = self.client.get_object(Bucket=self.name, Key=key)["Body"].read()
        return body


def s3_environ(endpoint: str, bucket: str, redirect: bool) -> dict[str, str]:
    """What a deployment sets for its object store."""
    return {
        "CERTLABEL_S3_BUCKET": bucket,
        "CERTLABEL_S3_ENDPOINT_URL": endpoint,
        "CERTLABEL_S3_REGION": REGION,
        "CERTLABEL_S3_ACCESS_KEY_ID": ACCESS_KEY,
        "CERTLABEL_S3_SECRET_ACCESS_KEY": SECRET_KEY,
        "CERTLABEL_S3_URL_SECONDS": "120",
        "CERTLABEL_S3_REDIRECT_DOWNLOADS": "true" if redirect else "false",
    }


@pytest.fixture
def bucket(
    moto_endpoint: str, settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Bucket:
    """A new bucket, and both storages in it as the settings module configures them.

    Assigning ``STORAGES`` sends ``setting_changed``, on which Django drops its cached storage
    instances: ``storages["releases"]`` and ``storages["jobs"]`` are rebuilt on the bucket (and
    on the test's local directories again when the test ends).

    With an object store a build works in ``<temporary directory>/certlabel-builds/`` (not
    beside a local release storage): the test gets its own temporary directory, as two
    deployments on one machine need their own ``TMPDIR``, since builds of other test databases
    (pytest-xdist workers) have the same ids.
    """
    import boto3

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    name = f"certlabel-{uuid.uuid4().hex[:16]}"
    client = boto3.client(
        "s3",
        endpoint_url=moto_endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
    )
    client.create_bucket(Bucket=name)
    configured = configured_settings(monkeypatch, s3_environ(moto_endpoint, name, redirect=True))
    settings.STORAGES = {
        **settings.STORAGES,
        "releases": configured["STORAGES"]["releases"],
        "jobs": configured["STORAGES"]["jobs"],
    }
    settings.RELEASE_DOWNLOAD_REDIRECT = configured["RELEASE_DOWNLOAD_REDIRECT"]
    return Bucket(name, client, moto_endpoint)


# ---------------------------------------------------------------------------------------------
# Settings: the environment decides the backends
# ---------------------------------------------------------------------------------------------


def test_without_a_bucket_both_storages_are_local_directories(monkeypatch):
    configured = configured_settings(monkeypatch, {})

    for alias, root in (("releases", "RELEASE_ROOT"), ("jobs", "JOB_ROOT")):
        storage = configured["STORAGES"][alias]
        assert storage["BACKEND"] == "django.core.files.storage.FileSystemStorage"
        assert storage["OPTIONS"] == {"location": str(configured[root])}
    assert configured["RELEASE_DOWNLOAD_REDIRECT"] is True


def test_a_bucket_puts_both_storages_in_the_object_store_under_their_prefixes(monkeypatch):
    environ = s3_environ("http://minio.internal:9000", "labels", redirect=False)
    configured = configured_settings(monkeypatch, environ)

    releases = configured["STORAGES"]["releases"]
    jobs = configured["STORAGES"]["jobs"]
    assert releases["BACKEND"] == jobs["BACKEND"] == "storages.backends.s3.S3Storage"
    common = {
        "bucket_name": "labels",
        "endpoint_url": "http://minio.internal:9000",
        "region_name": REGION,
        "addressing_style": "path",
        "access_key": ACCESS_KEY,
        "secret_key": SECRET_KEY,
        "default_acl": None,
        "querystring_expire": 120,
    }
    assert releases["OPTIONS"] | common == releases["OPTIONS"]
    assert jobs["OPTIONS"] | common == jobs["OPTIONS"]
    assert (releases["OPTIONS"]["location"], releases["OPTIONS"]["file_overwrite"]) == (
        "releases",
        True,
    )
    assert (jobs["OPTIONS"]["location"], jobs["OPTIONS"]["file_overwrite"]) == ("jobs", False)
    assert configured["RELEASE_DOWNLOAD_REDIRECT"] is False
    # the other storages stay as they are
    assert configured["STORAGES"]["default"]["BACKEND"].endswith("FileSystemStorage")


def test_without_keys_the_credentials_are_left_to_boto3(monkeypatch):
    configured = configured_settings(monkeypatch, {"CERTLABEL_S3_BUCKET": "labels"})

    options = configured["STORAGES"]["releases"]["OPTIONS"]
    assert "access_key" not in options and "secret_key" not in options
    assert options["endpoint_url"] is None and options["addressing_style"] is None
    assert options["querystring_expire"] == 300


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"CERTLABEL_S3_URL_SECONDS": "0"}, "CERTLABEL_S3_URL_SECONDS"),
        ({"CERTLABEL_S3_URL_SECONDS": "604801"}, "CERTLABEL_S3_URL_SECONDS"),
        ({"CERTLABEL_S3_ADDRESSING_STYLE": "dns"}, "CERTLABEL_S3_ADDRESSING_STYLE"),
        ({"CERTLABEL_S3_ACCESS_KEY_ID": "key"}, "CERTLABEL_S3_SECRET_ACCESS_KEY"),
        ({"CERTLABEL_S3_SECRET_ACCESS_KEY": "secret"}, "CERTLABEL_S3_ACCESS_KEY_ID"),
    ],
    ids=["lifetime-0", "lifetime-above-a-week", "style", "key-only", "secret-only"],
)
def test_an_object_store_setting_out_of_range_refuses_to_start(monkeypatch, environ, named):
    with pytest.raises(ImproperlyConfigured, match=named):
        configured_settings(monkeypatch, {"CERTLABEL_S3_BUCKET": "labels", **environ})


# ---------------------------------------------------------------------------------------------
# Uploads waiting for their job
# ---------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_large_upload_waits_in_the_bucket_and_its_job_imports_and_deletes_it(
    bucket, api, project, settings, django_capture_on_commit_callbacks
):
    settings.JOB_IMPORT_BYTES = 10
    data = jsonl_bytes([native_record(f"q{i}") for i in range(1, 4)])
    client = api(Role.MANAGER)

    # when a manager uploads a file above the threshold (the job waits for the commit)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(
            "/api/projects/study/imports/",
            {"file": SimpleUploadedFile("work.jsonl", data, content_type="application/x-ndjson")},
            format="multipart",
        )

    # then the upload is an object of the bucket under jobs/, byte for byte
    assert response.status_code == 202, response.content
    job = Job.objects.get(pk=response.json()["id"])
    key = f"jobs/{job.payload['upload']}"
    assert bucket.keys("jobs/") == {key}
    assert bucket.read(key) == data
    assert bucket.keys("releases/") == set()

    # and when the job runs (in this process), it imports the file and deletes the object
    for callback in callbacks:
        callback()
    job.refresh_from_db()
    assert job.status == "done", (job.status, job.error)
    assert job.result is not None and job.result["created"]["questions"] == 3
    assert Question.objects.filter(project=project).count() == 3
    assert ImportBatch.objects.filter(project=project).count() == 1
    assert bucket.keys("jobs/") == set()


# ---------------------------------------------------------------------------------------------
# Releases: built into the bucket, downloaded, exported
# ---------------------------------------------------------------------------------------------


def api_as(world: World, role: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(world.users[role])}")
    return client


def page_as(world: World, role: str) -> Client:
    client = Client()
    client.force_login(world.users[role])
    return client


def freeze_and_build(world: World, version: str = "2") -> tuple[Release, ReleaseBuild]:
    """Freeze a release of project A through the API and run its build here."""
    created = api_as(world, "manager").post(
        f"/api/projects/{world.a.slug}/releases/", {"version": version}, format="json"
    )
    assert created.status_code == 201, created.content
    release = Release.objects.get(pk=created.json()["id"])
    build = ReleaseBuild.objects.get(release=release, is_rebuild=False)
    build = release_build_execute(build_id=build.pk)
    assert build.status == "done", build.error
    return release, build


def expected_files(build: ReleaseBuild, bucket: Bucket) -> dict[str, str]:
    """Every downloadable file's sha256, as the manifest (and the build) record it."""
    key = f"releases/{build.storage_prefix}{MANIFEST}"
    manifest = json.loads(bucket.read(key))
    expected = {entry["name"]: entry["sha256"] for entry in manifest["files"]}
    expected[MANIFEST] = build.manifest_sha256
    expected[ARCHIVE] = build.archive_sha256
    assert {entry["name"]: entry["sha256"] for entry in build.files} == {
        name: sha for name, sha in expected.items() if name != ARCHIVE
    }
    return expected


@pytest.mark.django_db
def test_a_release_is_built_into_the_bucket(world, bucket, _release_storage):
    before = {path for path in _release_storage.rglob("*")}

    release, build = freeze_and_build(world)

    expected = expected_files(build, bucket)
    prefix = f"releases/{build.storage_prefix}"
    assert build.storage_prefix == f"{world.a.pk}/{release.pk}/{build.pk}/"
    assert bucket.keys(prefix) == {prefix + name for name in expected}
    for name, sha256 in expected.items():
        assert hashlib.sha256(bucket.read(prefix + name)).hexdigest() == sha256, name
    # nothing of it in the local release directory: not the files, not a working directory
    assert {path for path in _release_storage.rglob("*")} == before
    # the release page reads its counts from the manifest in the bucket
    page = page_as(world, "manager").get(f"/p/{world.a.slug}/releases/{release.pk}/")
    assert page.status_code == 200 and page.context is not None
    assert page.context["counts"]["rows"]


def _download_urls(world: World, release: Release, name: str) -> list[tuple[str, Any]]:
    return [
        (
            f"/api/projects/{world.a.slug}/releases/{release.pk}/files/{name}",
            api_as(world, "manager"),
        ),
        (f"/p/{world.a.slug}/releases/{release.pk}/files/{name}", page_as(world, "manager")),
    ]


@pytest.mark.django_db
def test_downloads_redirect_to_presigned_urls_of_the_exact_bytes(world, bucket, settings):
    settings.RELEASE_DOWNLOAD_REDIRECT = True
    release, build = freeze_and_build(world)
    expected = expected_files(build, bucket)

    for name, sha256 in expected.items():
        filename = f"{world.a.slug}-{release.version}.zip" if name == ARCHIVE else name
        for url, client in _download_urls(world, release, name):
            response = client.get(url)

            # a 302 to a presigned URL of the store, with the sha256, never cached
            assert response.status_code == 302, (url, response.status_code)
            location = response["Location"]
            assert location.startswith(f"{bucket.endpoint}/{bucket.name}/releases/")
            query = parse_qs(urlsplit(location).query)
            assert query["X-Amz-Expires"] == ["120"]
            assert "X-Amz-Signature" in query
            assert response["X-Content-SHA256"] == sha256
            assert "no-store" in response["Cache-Control"]

            # whose bytes (fetched as a browser would, without the site's credentials) are the
            # manifest's, named and typed as the streamed download would be
            with urllib.request.urlopen(location, timeout=30) as fetched:
                content = fetched.read()
                headers = fetched.headers
            assert hashlib.sha256(content).hexdigest() == sha256, (url, name)
            assert headers["Content-Disposition"] == f'attachment; filename="{filename}"'
            assert headers["Content-Type"].split(";")[0] == MEDIA_TYPES[name]

    # HEAD is redirected to a URL signed for HEAD
    url, client = _download_urls(world, release, ARCHIVE)[1]
    head = client.head(url)
    assert head.status_code == 302
    request = urllib.request.Request(head["Location"], method="HEAD")
    with urllib.request.urlopen(request, timeout=30) as answered:
        assert int(answered.headers["Content-Length"]) == build.archive_size


@pytest.mark.django_db
def test_downloads_stream_the_exact_bytes_when_redirects_are_off(world, bucket, settings):
    settings.RELEASE_DOWNLOAD_REDIRECT = False
    release, build = freeze_and_build(world)
    expected = expected_files(build, bucket)
    sizes = {entry["name"]: entry["size"] for entry in build.files}
    sizes[ARCHIVE] = build.archive_size

    for name, sha256 in expected.items():
        for url, client in _download_urls(world, release, name):
            response = client.get(url)

            assert response.status_code == 200, (url, response.status_code)
            content = b"".join(response.streaming_content)
            assert hashlib.sha256(content).hexdigest() == sha256, (url, name)
            assert response["X-Content-SHA256"] == sha256
            assert response["Content-Length"] == str(sizes[name]) == str(len(content))
            assert response["Content-Disposition"].startswith("attachment;")
    archive = page_as(world, "manager").get(
        f"/p/{world.a.slug}/releases/{release.pk}/files/{ARCHIVE}"
    )
    assert 'filename="study-2.zip"' in archive["Content-Disposition"]
    assert archive["Content-Type"] == "application/zip"


@pytest.mark.django_db
def test_a_release_in_the_bucket_exports_and_verifies(world, bucket, tmp_path):
    release, build = freeze_and_build(world)

    out = io.StringIO()
    call_command(
        "export_release",
        "--project",
        world.a.slug,
        "--version",
        release.version,
        "--existing",
        "--out",
        str(tmp_path),
        "--no-progress",
        stdout=out,
        stderr=io.StringIO(),
    )

    directory = tmp_path / f"{world.a.slug}-{release.version}"
    assert "(verified)" in out.getvalue()
    manifest = verify_release(directory)
    assert manifest["release"]["version"] == release.version
    verified = io.StringIO()
    call_command(
        "verify_release",
        str(directory / ARCHIVE),
        "--sha256",
        build.manifest_sha256,
        stdout=verified,
    )
    assert verified.getvalue().startswith("OK: release 2")
