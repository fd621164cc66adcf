"""Shared fixtures. Test-only overrides of settings live here, not in a second settings module."""

from __future__ import annotations

import copy
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import is_hypothesis_test
from hypothesis import settings as hypothesis_settings

from labeling.importers.native import read_jsonl
from labeling.models import Project, Role
from labeling.services import membership_set, project_create, workload_import
from labeling.services.imports import ImportResult, fingerprint
from tests.factories import UserFactory

# ``../shared/data`` beside the repository, or wherever CERTLABEL_SHARED_DATA points.
SHARED_DATA = Path(
    os.environ.get(
        "CERTLABEL_SHARED_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data"
    )
)


# Hypothesis profiles. ``make test`` and CI keep Hypothesis's own ("default", or its built-in
# "ci" where a CI variable is set): every property test runs the example count its
# ``@settings`` names. ``fast`` (``make test-fast`` passes ``--hypothesis-profile=fast``;
# ``HYPOTHESIS_PROFILE=fast`` selects it too) runs a fifth of that, at least 10 (all if fewer).
# An explicit ``@settings`` outranks any profile, so the share is applied per test, after
# collection, below.
EXAMPLE_SHARE = {"fast": 0.2}
FAST_MIN_EXAMPLES = 10
hypothesis_settings.register_profile("fast")  # else as the profile loaded now
if os.environ.get("HYPOTHESIS_PROFILE"):
    hypothesis_settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Scale each property test's ``max_examples`` by the current profile's share."""
    share = EXAMPLE_SHARE.get(hypothesis_settings.get_current_profile_name(), 1.0)
    if share == 1.0:
        return
    done: set[int] = set()
    for item in items:
        test = getattr(item, "obj", None)
        if not is_hypothesis_test(test) or id(test) in done:
            continue
        done.add(id(test))
        # the settings @given runs with (its own @settings or the profile's), read at call time
        own = test._hypothesis_internal_use_settings
        count = min(own.max_examples, max(FAST_MIN_EXAMPLES, round(own.max_examples * share)))
        test._hypothesis_internal_use_settings = hypothesis_settings(own, max_examples=count)


@pytest.fixture(scope="session")
def django_db_modify_db_settings(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Test on a SQLite *file*, as production does, not the shared-cache in-memory database.

    The in-memory default has table-level locks ("database table is locked") where a file has
    the busy timeout and WAL that concurrent requests rely on.

    The file is new per session, except under ``--reuse-db``: then it lives at a fixed path in
    pytest's cache directory (``.pytest_cache/d/test-db``, inside this work tree) so the next
    run finds it migrated. Each pytest-xdist worker gets its own file (``_gw0``, ``_gw1``...).
    """
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"] != "labeling.sqlite_backend":
        # PostgreSQL: pytest-django's own per-worker suffix (test_certlabel_gw0...).
        request.getfixturevalue("django_db_modify_db_settings_parallel_suffix")
        return
    cache = getattr(request.config, "cache", None)
    if request.config.getvalue("reuse_db") and cache is not None:
        directory = Path(cache.mkdir("test-db"))
    else:
        directory = tmp_path_factory.mktemp("db")
    worker = getattr(request.config, "workerinput", {}).get("workerid", "main")
    db.setdefault("TEST", {})["NAME"] = str(directory / f"test_{worker}.sqlite3")


FAST_SETTINGS: dict[str, Any] = {
    "PASSWORD_HASHERS": ["django.contrib.auth.hashers.MD5PasswordHasher"],
    "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
}


@pytest.fixture(autouse=True)
def _fast_settings(settings: Any) -> None:
    for name, value in FAST_SETTINGS.items():
        setattr(settings, name, value)


def _storages_at(storages: dict[str, Any], location: Path) -> dict[str, Any]:
    """``STORAGES`` with the ``releases`` storage at ``location``."""
    return {
        **storages,
        "releases": {
            **storages["releases"],
            "OPTIONS": {**storages["releases"].get("OPTIONS", {}), "location": str(location)},
        },
    }


@pytest.fixture(autouse=True)
def _fresh_throttle_counters() -> Iterable[None]:
    """Each test starts with empty DRF throttle counters (they live in the per-process cache)."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def _broker_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with the broker taken as reachable.

    After a failed enqueue the scheduler skips the broker for a couple of seconds (a
    per-process backoff); a test that made one fail must not leave the next test's marks
    unscheduled.
    """
    monkeypatch.setattr("certification.services.derived._broker_down_until", 0.0)


@pytest.fixture(autouse=True)
def _release_storage(settings: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Keep built releases in a temporary directory per test, never in the repository.

    Assigning ``STORAGES`` sends ``setting_changed``, on which Django drops its storage
    instances, so ``storages["releases"]`` is rebuilt on the new location.
    """
    location = tmp_path_factory.mktemp("releases")
    settings.STORAGES = _storages_at(settings.STORAGES, location)
    return location


@pytest.fixture(autouse=True)
def _job_storage(settings: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Keep the uploads waiting for a background job in a temporary directory per test."""
    location = tmp_path_factory.mktemp("jobs")
    storages = {**settings.STORAGES}
    storages["jobs"] = {
        **storages["jobs"],
        "OPTIONS": {**storages["jobs"].get("OPTIONS", {}), "location": str(location)},
    }
    settings.STORAGES = storages
    return location


@pytest.fixture(autouse=True)
def _celery_in_process(request: pytest.FixtureRequest) -> Iterable[None]:
    """Run Celery tasks in the test's process, whatever the broker (a mock boundary, C10).

    Tests assert the database state a task leaves, so they need it to have run. With a Redis
    broker (CI's second run) tasks would otherwise wait for a worker that the test does not
    start. Tests marked ``celery_worker`` start a real worker and keep the configured mode.
    """
    if request.node.get_closest_marker("celery_worker"):
        yield
        return
    with _eager_celery():
        yield


@contextmanager
def _eager_celery() -> Iterator[None]:
    from labeling.celery import app

    eager, propagates = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    try:
        yield
    finally:
        app.conf.task_always_eager, app.conf.task_eager_propagates = eager, propagates


@contextmanager
def module_data(
    django_db_blocker: Any, location: Path, **overrides: Any
) -> Iterator[Callable[[], Any]]:
    """Write a module's shared data in a transaction that is rolled back after the module.

    For a module-scoped fixture whose data most tests of the module need afresh and which takes
    long to write: ``with module_data(django_db_blocker, location) as write:``, then
    ``write(build)`` calls ``build()`` with database access, this file's test settings (fast
    hasher, releases stored at ``location``, ``overrides``) and in-process Celery, and returns
    what it returns. The transaction stays open until the ``with`` ends, after the module's last
    test. Each test runs inside it in pytest-django's own savepoint (the ``db`` fixture, as
    ever), rolled back after the test: a test sees the data exactly as written, whatever the
    tests before it did. The per-test fixture should hand out a ``copy.deepcopy`` of the
    objects, so that in-memory changes stay in their test too.

    Every database test of such a module sees the data, and none may use ``transaction=True``
    (it would commit into, then flush, the module's transaction). Under pytest-xdist each
    worker that runs tests of the module writes its own copy.
    """
    from django.conf import settings
    from django.db import transaction
    from django.test import override_settings

    with django_db_blocker.unblock():
        outer = transaction.atomic()
        # as the atomic blocks of a django.test.TestCase: durable blocks may nest in it
        outer._from_testcase = True  # type: ignore[attr-defined]
        outer.__enter__()

    def write(build: Callable[[], Any]) -> Any:
        storages = _storages_at(settings.STORAGES, location)
        with (
            django_db_blocker.unblock(),
            override_settings(**{**FAST_SETTINGS, "STORAGES": storages, **overrides}),
            _eager_celery(),
        ):
            return build()

    try:
        yield write
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


@pytest.fixture(scope="module")
def _module_world(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, Path]]:
    """``build_world()`` (``tests/worlds.py``) once per test module, and where its files are.

    Building the world takes most of a second, so the tests of a module share one build
    (:func:`module_data`), each in its own rolled-back savepoint (fixture :func:`world`).
    """
    from tests.worlds import build_world

    location = tmp_path_factory.mktemp("world-releases")
    with module_data(django_db_blocker, location) as write:
        yield write(build_world), location


@pytest.fixture
def world(_module_world: tuple[Any, Path], _release_storage: Path, db: None) -> Any:
    """A world as ``build_world()`` returns it, built once per module (:func:`_module_world`).

    Each test gets its own deep copy of the objects (an in-memory change, such as a refused
    ``save()``, stays in the test) and its own copy of the world's release files (built into
    the module's directory), in its own release storage.
    """
    built, location = _module_world
    shutil.copytree(location, _release_storage, dirs_exist_ok=True)
    return copy.deepcopy(built)


@pytest.fixture
def shared_data() -> Path:
    """The third-party datasets beside the repository; tests skip when they are absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared datasets not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture
def project(db: None) -> Project:
    """A project with the default label policy v1."""
    return project_create(slug="study", name="Study")


@pytest.fixture
def member(project: Project) -> Callable[[str], Any]:
    """Make a user with ``role`` in ``project``: ``member("annotator")``."""

    def make(role: str = Role.ANNOTATOR) -> Any:
        user = UserFactory()
        membership_set(project=project, user=user, role=role)
        return user

    return make


def _user_for(role: str, member: Callable[[str], Any]) -> Any:
    if role == "nonmember":
        return UserFactory()
    if role == "staff":
        return UserFactory(is_staff=True)
    return member(role)


@pytest.fixture
def login(client: Any, member: Callable[[str], Any]) -> Callable[[str], Any]:
    """Log the test client in as ``role`` in the project, ``nonmember``, ``staff`` or
    ``anonymous`` (nobody): ``login("manager").get(url)``."""

    def make(role: str) -> Any:
        if role != "anonymous":
            client.force_login(_user_for(role, member))
        return client

    return make


@pytest.fixture
def api(member: Callable[[str], Any]) -> Callable[[str], Any]:
    """An API client with a token for ``role`` (as :func:`login`): ``api("manager").get(url)``."""
    from rest_framework.test import APIClient

    from labeling.services.tokens import api_token_create

    def make(role: str) -> APIClient:
        client = APIClient()
        if role != "anonymous":
            secret = api_token_create(user=_user_for(role, member), name="test").secret
            client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
        return client

    return make


def row_counts() -> dict[str, int]:
    """Return the row count of every labelling model, by model name (to prove nothing changed).

    API tokens are left out: a test client makes its token when it first authenticates.
    """
    from django.apps import apps

    return {
        m.__name__: m.objects.count()
        for m in apps.get_app_config("labeling").get_models()
        if m.__name__ != "ApiToken"
    }


def jsonl_bytes(records: Iterable[dict[str, Any]]) -> bytes:
    """Serialise records as JSONL: UTF-8 with non-ASCII kept as is, or ``\\u`` escapes for
    strings UTF-8 cannot carry (lone surrogates)."""

    def line(record: dict[str, Any]) -> bytes:
        try:
            return json.dumps(record, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(record).encode("ascii")

    return b"".join(line(r) + b"\n" for r in records)


@pytest.fixture
def import_records(project: Project) -> Callable[..., ImportResult]:
    """Import native records (dicts) into ``project`` (or another) through the real service."""

    def run(records: list[dict[str, Any]], target: Project | None = None) -> ImportResult:
        return import_native(target or project, records)

    return run


def import_native(project: Project, records: list[dict[str, Any]]) -> ImportResult:
    """Import native records (dicts) into ``project`` through the real service."""
    import io

    data = jsonl_bytes(records)
    return workload_import(
        project=project,
        records=read_jsonl(io.BytesIO(data)),
        format="native",
        filename="test.jsonl",
        file_sha256=fingerprint(data.decode("utf-8")),
    )


def native_record(external_id: str = "q1", **overrides: Any) -> dict[str, Any]:
    """A valid native record with one source, two candidates and anchored claims."""
    record: dict[str, Any] = {
        "external_id": external_id,
        "text": "When did the bridge open?",
        "group_key": "",
        "sources": [
            {
                "id": f"doc-{external_id}",
                "text": "The bridge opened in 1932. It spans the harbour.",
                "uri": "https://example.org/bridge",
                "rank": 1,
                "score": 0.91,
            }
        ],
        "candidates": [
            {
                "id": "c0",
                "text": "It opened in 1932. It spans the harbour.",
                "generator": "model-a",
                "canonical_form": "1932",
                "claims": [
                    {"text": "It opened in 1932.", "start": 0, "end": 18},
                    {"text": "It spans the harbour."},
                ],
            },
            {"id": "c1", "text": "1931.", "generator": "model-a", "canonical_form": "1931"},
        ],
    }
    record.update(overrides)
    return record
