"""Share-nothing hosts: two web processes and two Celery workers that share only PostgreSQL,
Redis and an S3-compatible object store (a real moto server) import a workload and build and
serve a release.

Every process is a real one (gunicorn, ``celery worker``) with its own private folders
(``CERTLABEL_RELEASE_ROOT``, ``CERTLABEL_JOB_ROOT``, ``CERTLABEL_BUILD_ROOT``, ``TMPDIR``,
``CERTLABEL_MAIL_DIR``), so that no file can pass from one to another except through the bucket:

- an upload above ``CERTLABEL_JOB_IMPORT_BYTES`` sent to web A waits in the bucket under
  ``jobs/``; a worker imports it (its job polled through web B) and deletes it;
- with worker 1 stopped, a release frozen through web A is built by worker 2 into the bucket
  under ``releases/``; every file downloaded through web B (a 302 to a presigned URL of the
  store, the default) has the manifest's sha256, and the zip verifies;
- no private folder of any process holds a release file or the upload afterwards.

Runs only on PostgreSQL with a ``redis://`` broker and result backend
(``tests/labeling/test_celery_worker.py``) and with moto installed; ``CERTLABEL_REQUIRE_SERVICES=1``
turns the skips into failures.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from certification.models import ReleaseBuild
from labeling.models import Role
from labeling.release_format import ARCHIVE, MANIFEST
from labeling.release_verify import verify_release
from labeling.services import membership_set
from labeling.services.tokens import api_token_create
from tests.certification.test_worker_faults import _queues
from tests.conftest import jsonl_bytes, native_record
from tests.factories import UserFactory
from tests.labeling.test_celery_worker import _require_services, _stop_worker, _test_database_url
from tests.test_object_storage import (  # noqa: F401  (moto_endpoint: a module fixture)
    ACCESS_KEY,
    REGION,
    SECRET_KEY,
    Bucket,
    _free_port,
    moto_endpoint,
    s3_environ,
)

pytestmark = [pytest.mark.celery_worker, pytest.mark.slow]
logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[1]
#: Seconds a process may take to answer (web) or to report ready (worker) after it starts.
START_SECONDS = 60.0
#: Seconds the import job and the release build may each take, from their request.
DONE_SECONDS = 60.0
#: The upload: this many records, far above the job threshold the web processes get.
RECORDS = 40
JOB_IMPORT_BYTES = 1024
#: Each process's private folders: the environment variable and the folder's name.
PRIVATE = {
    "CERTLABEL_RELEASE_ROOT": "releases",
    "CERTLABEL_JOB_ROOT": "jobs",
    "CERTLABEL_BUILD_ROOT": "builds",
    "TMPDIR": "tmp",
    "CERTLABEL_MAIL_DIR": "mail",
}
#: The private folders that must stay empty: the object store replaces them.
UNUSED = ("CERTLABEL_RELEASE_ROOT", "CERTLABEL_JOB_ROOT", "CERTLABEL_BUILD_ROOT")
SECRET = "multi-host-test-secret-key-0123456789abcdefghijklmnop"  # noqa: S105


@dataclass
class Host:
    """One process of the deployment: its name, private folders, log and process."""

    name: str
    folders: dict[str, Path]
    log: Path
    process: subprocess.Popen[bytes]
    base: str = ""  # a web process's URL
    stopped: bool = False  # stopped by the test: its exit is expected

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@dataclass
class Hosts:
    """Every process of the test, on the bucket ``bucket``; stopped by :meth:`stop`."""

    directory: Path
    bucket: Bucket
    hosts: list[Host] = field(default_factory=list)

    def logs(self) -> str:
        return "\n".join(f"--- {host.name}\n{host.log_text()[-6000:]}" for host in self.hosts)

    def _environment(self, name: str) -> tuple[dict[str, str], dict[str, Path]]:
        """What every process gets (the same database, broker, bucket), and its own folders."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("DJANGO_", "CELERY_", "CERTLABEL_", "AWS_")) and k != "TMPDIR"
        }
        s3 = s3_environ(self.bucket.endpoint, self.bucket.name, redirect=True)
        del s3["CERTLABEL_S3_REDIRECT_DOWNLOADS"]  # the default: downloads redirect
        env.update(
            s3,
            DJANGO_SETTINGS_MODULE="labeling.settings",
            DJANGO_DEBUG="false",
            DJANGO_SECRET_KEY=SECRET,
            DJANGO_ALLOWED_HOSTS="127.0.0.1",
            DJANGO_SECURE_COOKIES="false",
            DATABASE_URL=_test_database_url(),
            CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
            CELERY_RESULT_BACKEND=settings.CELERY_RESULT_BACKEND or "",
            CELERY_TASK_ALWAYS_EAGER="false",
        )
        folders = {}
        for variable, folder in PRIVATE.items():
            path = self.directory / name / folder
            path.mkdir(parents=True)
            folders[variable] = path
            env[variable] = str(path)
        return env, folders

    def _start(self, name: str, command: list[str], env: dict[str, str], folders: Any) -> Host:
        log = self.directory / "logs" / f"{name}.log"
        log.parent.mkdir(exist_ok=True)
        with log.open("wb") as out:
            process = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        host = Host(name, folders, log, process)
        self.hosts.append(host)
        return host

    def web(self, name: str) -> Host:
        env, folders = self._environment(name)
        env["CERTLABEL_JOB_IMPORT_BYTES"] = str(JOB_IMPORT_BYTES)
        port = _free_port()
        gunicorn = Path(sys.executable).with_name("gunicorn")
        command = [
            str(gunicorn), "labeling.wsgi:application", "--bind", f"127.0.0.1:{port}",
            "--workers", "1", "--access-logfile", "-", "--graceful-timeout", "5",
        ]  # fmt: skip
        host = self._start(name, command, env, folders)
        host.base = f"http://127.0.0.1:{port}"
        return host

    def worker(self, name: str) -> Host:
        env, folders = self._environment(name)
        command = [
            sys.executable, "-m", "celery", "-A", "labeling", "worker",
            "--pool=solo", "--concurrency=1", "-Q", _queues(),
            "-n", f"{name.replace(' ', '')}@%h",
            "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel=INFO",
        ]  # fmt: skip
        return self._start(name, command, env, folders)

    def stop(self) -> None:
        """Stop every process still running: SIGTERM to all at once, SIGKILL after 20 s."""
        running = [host.process for host in self.hosts if host.process.poll() is None]
        for process in running:
            process.terminate()  # warm shutdown (worker), graceful stop (gunicorn)
        deadline = time.monotonic() + 20
        for process in running:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


@pytest.fixture
def hosts(transactional_db: None, moto_endpoint: str) -> Iterator[Hosts]:  # noqa: F811
    """A new bucket of the moto server; every process started is stopped, on every path.

    Requests ``transactional_db`` so that the processes are stopped before the test database
    is flushed.
    """
    _require_services()
    import boto3  # installed with moto (the moto_endpoint fixture skips without it)

    name = f"certlabel-{uuid.uuid4().hex[:16]}"
    client = boto3.client(
        "s3",
        endpoint_url=moto_endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
    )
    client.create_bucket(Bucket=name)
    with tempfile.TemporaryDirectory(prefix="certlabel-hosts-") as tmp:
        running = Hosts(Path(tmp), Bucket(name, client, moto_endpoint))
        try:
            yield running
        finally:
            running.stop()


# -- HTTP, as a client on another machine -----------------------------------------------------
class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Answer a redirect as it is (a 302 and its Location), never follow it."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _call(
    url: str, token: str, *, data: bytes | None = None, content_type: str | None = None
) -> tuple[int, Message, bytes]:
    headers = {"Authorization": f"Token {token}"}
    if content_type:
        headers["Content-Type"] = content_type
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with _OPENER.open(request, timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def _json(url: str, token: str, **kwargs: Any) -> tuple[int, Any]:
    status, _, body = _call(url, token, **kwargs)
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body.decode(errors="replace")


def _multipart(fields: dict[str, str], filename: str, data: bytes) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        f"Content-Type: application/x-ndjson\r\n\r\n".encode()
        + data
        + b"\r\n"
    )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def _wait(check: Callable[[], bool], timeout: float, hosts: Hosts, what: str) -> float:
    """Poll ``check`` every 100 ms while every process still runs; return the seconds it took."""
    started = time.monotonic()
    while not check():
        for host in hosts.hosts:
            if host.process.poll() is not None and not host.stopped:
                pytest.fail(f"{host.name} exited while waiting for {what}\n{hosts.logs()}")
        assert time.monotonic() - started < timeout, f"{what}: not within {timeout}s\n" + (
            hosts.logs()
        )
        time.sleep(0.1)
    return time.monotonic() - started


def _web_ready(web: Host, token: str) -> Callable[[], bool]:
    def ready() -> bool:
        try:
            return _call(f"{web.base}/api/projects/", token)[0] == 200
        except OSError:
            return False

    return ready


def _worker_ready(worker: Host) -> Callable[[], bool]:
    return lambda: " ready." in worker.log_text()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _files_under(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()] if folder.exists() else []


def _task_lines(host: Host, task: str) -> list[str]:
    return [line for line in host.log_text().splitlines() if f"{task}[" in line]


# -- the test ----------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_web_and_worker_hosts_share_only_the_database_the_broker_and_the_bucket(project, hosts):
    timings: dict[str, float] = {}
    step = time.monotonic()

    def lap(name: str) -> None:
        nonlocal step
        now = time.monotonic()
        timings[name] = now - step
        step = now
        logger.warning(f"multi-host: {name} took {timings[name]:.2f}s")

    bucket = hosts.bucket
    # given a manager with an API token (committed: the processes read it), and the project
    # "study" with its default label policy
    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    token = api_token_create(user=manager, name="multi-host").secret
    api = f"/api/projects/{project.slug}"

    # and two web hosts, each with its own folders
    web_a, web_b = hosts.web("web A"), hosts.web("web B")
    _wait(_web_ready(web_a, token), START_SECONDS, hosts, "web A answering")
    _wait(_web_ready(web_b, token), START_SECONDS, hosts, "web B answering")
    lap("start web A and web B")

    # when a manager uploads a workload larger than the job threshold to web A (no worker runs
    # yet, so the upload is seen waiting in the bucket)
    data = jsonl_bytes([native_record(f"q{i}") for i in range(1, RECORDS + 1)])
    assert len(data) > JOB_IMPORT_BYTES
    body, content_type = _multipart({"format": "native"}, "work.jsonl", data)
    status, job = _json(f"{web_a.base}{api}/imports/", token, data=body, content_type=content_type)
    assert status == 202, (status, job, hosts.logs())
    assert job["status"] == "pending" and job["kind"] == "workload_import", job
    lap("upload to web A (202, a job)")

    # then the upload waits in the bucket under jobs/, byte for byte
    uploads = bucket.keys("jobs/")
    assert len(uploads) == 1 and next(iter(uploads)).startswith(f"jobs/{project.pk}/"), uploads
    upload_key = next(iter(uploads))
    assert bucket.read(upload_key) == data
    assert bucket.keys("releases/") == set()

    # and when two workers start, each with its own folders, one of them imports it: the job,
    # polled through web B, is done with every record
    workers = [hosts.worker("worker 1"), hosts.worker("worker 2")]
    for worker in workers:
        _wait(_worker_ready(worker), START_SECONDS, hosts, f"{worker.name} ready")
    lap("start worker 1 and worker 2")
    job_url = f"{web_b.base}{api}/jobs/{job['id']}/"
    polled: dict[str, Any] = {}

    def job_ended() -> bool:
        status, polled["job"] = _json(job_url, token)
        assert status == 200, (status, polled["job"])
        return polled["job"]["status"] in ("done", "failed")

    _wait(job_ended, DONE_SECONDS, hosts, f"job {job['id']} ended")
    lap("import job done (polled through web B)")
    done = polled["job"]
    assert done["status"] == "done", (done, hosts.logs())
    assert done["result"]["records"] == RECORDS, done
    assert done["result"]["created"]["questions"] == RECORDS, done
    assert done["attempts"] == 1, done

    def importers() -> list[Host]:
        task = "labeling.tasks.job_run_task"
        return [w for w in workers if any("succeeded" in x for x in _task_lines(w, task))]

    # The job's row says done as its transaction commits; Celery logs "succeeded" just after.
    _wait(lambda: bool(importers()), START_SECONDS, hosts, "the importer's task log line")
    assert len(importers()) == 1, hosts.logs()
    logger.warning(
        f"multi-host: job {job['id']} was run by {importers()[0].name} "
        f"(pid {importers()[0].process.pid})"
    )
    # and its upload is deleted from the bucket
    _wait(lambda: bucket.keys("jobs/") == set(), 10, hosts, "the upload deleted")
    lap("upload deleted from the bucket")

    # when worker 1 stops, so that the build can only run on worker 2
    workers[0].stopped = True
    _stop_worker(workers[0].process)
    assert workers[0].process.returncode is not None
    lap("stop worker 1")

    # and a manager freezes a release through web A
    status, release = _json(
        f"{web_a.base}{api}/releases/",
        token,
        data=json.dumps({"version": "1"}).encode(),
        content_type="application/json",
    )
    assert status == 201, (status, release, hosts.logs())
    release_url = f"{web_b.base}{api}/releases/{release['id']}/"

    def build_ended() -> bool:
        status, polled["release"] = _json(release_url, token)
        assert status == 200, (status, polled["release"])
        return polled["release"]["build"]["status"] in ("done", "failed")

    _wait(build_ended, DONE_SECONDS, hosts, f"release {release['id']} built")
    lap("freeze on web A, build done (polled through web B)")
    detail = polled["release"]
    build = detail["build"]
    assert build["status"] == "done", (build, hosts.logs())
    assert build["attempts"] == 1 and build["error"] == "", build
    # built by worker 2 (worker 1 was stopped before the freeze)
    assert _task_lines(workers[0], "certification.tasks.release_build_task") == []
    built = _task_lines(workers[1], "certification.tasks.release_build_task")
    succeeded = f"'build_id': {build['id']},"  # the task's return value, in Celery's log line
    assert any("succeeded" in line and succeeded in line for line in built), hosts.logs()
    logger.warning(
        f"multi-host: build {build['id']} was run by worker 2 (pid {workers[1].process.pid})"
    )

    # then every file downloads through web B: a 302 to a presigned URL of the store (without
    # the site's credentials), whose bytes are the manifest's
    files = {entry["name"]: entry for entry in detail["files"]}
    assert MANIFEST in files and ARCHIVE in files, files
    contents: dict[str, bytes] = {}
    for name, entry in files.items():
        status, headers, _ = _call(f"{web_b.base}{entry['url']}", token)
        assert status == 302, (name, status, hosts.logs())
        location = headers["Location"]
        assert location.startswith(f"{bucket.endpoint}/{bucket.name}/releases/"), location
        assert headers["X-Content-SHA256"] == entry["sha256"], name
        with urllib.request.urlopen(location, timeout=30) as fetched:  # noqa: S310
            contents[name] = fetched.read()
    lap(f"download {len(files)} files through web B")
    manifest_bytes = contents.pop(MANIFEST)
    assert _sha256(manifest_bytes) == build["manifest_sha256"] == files[MANIFEST]["sha256"]
    manifest = json.loads(manifest_bytes)
    listed = {entry["name"]: entry["sha256"] for entry in manifest["files"]}
    archive = contents.pop(ARCHIVE)
    assert _sha256(archive) == build["archive_sha256"] == files[ARCHIVE]["sha256"]
    assert set(contents) == set(listed), (sorted(contents), sorted(listed))
    for name, content in contents.items():
        assert _sha256(content) == listed[name] == files[name]["sha256"], name
    # and the zip holds the same files and verifies
    unpacked = hosts.directory / "download"
    with zipfile.ZipFile(io.BytesIO(archive)) as opened:
        opened.extractall(unpacked)
    (folder,) = list(unpacked.iterdir())
    for name, content in [(MANIFEST, manifest_bytes), *contents.items()]:
        assert (folder / name).read_bytes() == content, name
    assert verify_release(folder)["release"]["version"] == "1"

    # and the release is in the bucket under releases/, exactly its files
    prefix = ReleaseBuild.objects.get(pk=build["id"]).storage_prefix
    assert prefix == f"{project.pk}/{release['id']}/{build['id']}/"
    assert bucket.keys("releases/") == {f"releases/{prefix}{name}" for name in files}
    assert bucket.keys("jobs/") == set()

    # and no private folder of any process holds a release file or the upload: the release,
    # job and build roots hold nothing at all, the temporary and mail folders none of them
    forbidden = {_sha256(data): "the upload"} | {
        entry["sha256"]: name for name, entry in files.items()
    }
    for host in hosts.hosts:
        for variable in UNUSED:
            assert _files_under(host.folders[variable]) == [], (host.name, variable)
        for variable in ("TMPDIR", "CERTLABEL_MAIL_DIR"):
            for path in _files_under(host.folders[variable]):
                found = forbidden.get(_sha256(path.read_bytes()))
                assert found is None, f"{host.name}: {path} is {found}"
    lap("check the bucket and every private folder")
    logger.warning(
        "multi-host: "
        + ", ".join(f"{name} {seconds:.2f}s" for name, seconds in timings.items())
        + f"; total {sum(timings.values()):.2f}s"
    )
