"""Access to releases: pages, API, admin, commands; immutability through each of them.

The world (``tests/worlds.py``) has a built release ``1`` in project A (``study``) and in
project B (``other``), with a manager, an adjudicator and annotators.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.core.files.storage import storages
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, transaction
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from certification.models import (
    BuildStatus,
    Release,
    ReleaseBuild,
    ReleaseTag,
    ReleaseTagMove,
)
from certification.selectors import release_content_build
from certification.services.releases import (
    release_build_execute,
    release_rebuild,
    release_tag_move,
)
from labeling.models import MAX_ID
from labeling.release_format import ARCHIVE, LABELS_JSONL, MANIFEST, MEDIA_TYPES
from tests.worlds import World, token_for

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]


# ``world``: the fixture of tests/conftest.py, built once per module and rolled back after
# each test (``_module_world``).


def api_as(world: World, role: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(world.users[role])}")
    return client


def page_as(world: World, role: str) -> Client:
    client = Client()
    client.force_login(world.users[role])
    return client


def api_url(world: World, suffix: str = "", release: Release | None = None) -> str:
    release = release or world.releases["a"]
    return f"/api/projects/{world.a.slug}/releases/{release.pk}/{suffix}"


def page_url(world: World, suffix: str = "", release: Release | None = None) -> str:
    release = release or world.releases["a"]
    return f"/p/{world.a.slug}/releases/{release.pk}/{suffix}"


def body(response: Any) -> bytes:
    return b"".join(response.streaming_content)


def build_of(release: Release) -> ReleaseBuild:
    return ReleaseBuild.objects.get(release=release, is_rebuild=False)


def stored_bytes(build: ReleaseBuild, name: str) -> bytes:
    with storages["releases"].open(build.storage_prefix + name, "rb") as stream:
        return stream.read()


def built(release: Release) -> ReleaseBuild:
    """Run the release's pending first build here (on_commit never fires inside a test)."""
    return release_build_execute(build_id=build_of(release).pk)


# ---------------------------------------------------------------------------------------------
# Immutability: API, admin, database
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["put", "patch", "delete"])
@pytest.mark.parametrize("suffix", ["", "rebuild/", "files/labels.jsonl"])
def test_the_api_has_no_write_to_a_release(world, method, suffix):
    release = world.releases["a"]
    before = Release.objects.filter(pk=release.pk).values().get()

    response = getattr(api_as(world, "manager"), method)(
        api_url(world, suffix), {"notes": "changed", "version": "9"}, format="json"
    )

    assert response.status_code == 405
    assert Release.objects.filter(pk=release.pk).values().get() == before


@pytest.mark.parametrize("method", ["put", "patch", "delete"])
def test_the_release_list_and_tags_have_no_put_patch_or_delete(world, method):
    client = api_as(world, "manager")
    for url in (
        f"/api/projects/{world.a.slug}/releases/",
        f"/api/projects/{world.a.slug}/release-tags/",
    ):
        assert getattr(client, method)(url, {}, format="json").status_code == 405


@pytest.mark.parametrize("model", [Release, ReleaseBuild, ReleaseTag, ReleaseTagMove])
def test_the_admin_shows_releases_read_only(world, admin_client, model):
    release = world.releases["a"]
    release_tag_move(project=world.a, actor=world.users["manager"], name="latest", release=release)
    obj = model.objects.order_by("pk").first()
    meta = model._meta
    name = f"admin:{meta.app_label}_{meta.model_name}"

    changelist = admin_client.get(reverse(f"{name}_changelist"))
    change = admin_client.get(reverse(f"{name}_change", args=[obj.pk]))
    post = admin_client.post(reverse(f"{name}_change", args=[obj.pk]), {"notes": "x"})
    delete = admin_client.get(reverse(f"{name}_delete", args=[obj.pk]))
    delete_post = admin_client.post(reverse(f"{name}_delete", args=[obj.pk]), {"post": "yes"})
    add = admin_client.get(reverse(f"{name}_add"))

    assert changelist.status_code == 200
    assert "delete_selected" not in changelist.content.decode()
    assert change.status_code == 200
    assert 'name="_save"' not in change.content.decode()
    assert post.status_code == 403
    assert (delete.status_code, delete_post.status_code, add.status_code) == (403, 403, 403)
    assert model.objects.filter(pk=obj.pk).exists()
    release.refresh_from_db()
    assert release.notes == ""


def test_the_database_refuses_to_update_a_release(world):
    release = world.releases["a"]

    with pytest.raises(DatabaseError), transaction.atomic():
        Release.objects.filter(pk=release.pk).update(notes="x")
    with pytest.raises(DatabaseError), transaction.atomic():
        release.version = "7"
        release.save()

    assert Release.objects.get(pk=release.pk).notes == ""
    assert Release.objects.get(pk=release.pk).version == "1"


def test_a_correction_is_a_new_release_with_its_parent(world):
    client = api_as(world, "manager")
    first = world.releases["a"]

    response = client.post(
        f"/api/projects/{world.a.slug}/releases/",
        {"version": "1.0.1", "notes": "fixes a label"},
        format="json",
    )

    assert response.status_code == 201, response.json()
    data = response.json()
    assert (data["version"], data["parent"], data["parent_version"]) == ("1.0.1", first.pk, "1")
    assert data["build"]["status"] == "pending"
    assert data["certifies"][0]["run"]["id"] == world.runs["a"].pk
    assert client.get(api_url(world, release=first)).json()["children"] == [data["id"]]


# ---------------------------------------------------------------------------------------------
# Roles: annotators, other projects, ids beyond 64 bits
# ---------------------------------------------------------------------------------------------


def test_annotators_cannot_reach_releases(world):
    api, page = api_as(world, "annotator"), page_as(world, "annotator")
    for url in (
        f"/api/projects/{world.a.slug}/releases/",
        api_url(world),
        api_url(world, "files/labels.jsonl"),
        api_url(world, f"files/{ARCHIVE}"),
        f"/api/projects/{world.a.slug}/release-tags/",
    ):
        assert api.get(url).status_code == 403, url
    for url in (
        f"/p/{world.a.slug}/releases/",
        page_url(world),
        page_url(world, "files/labels.jsonl"),
        page_url(world, f"files/{ARCHIVE}"),
    ):
        assert page.get(url).status_code == 404, url
    assert api.post(api_url(world, "rebuild/")).status_code == 403
    assert page.post(page_url(world, "rebuild/")).status_code == 404


@pytest.mark.parametrize("role", ["manager", "adjudicator"])
def test_another_projects_release_and_files_are_404(world, role):
    foreign = world.releases["b"]
    api, page = api_as(world, role), page_as(world, role)

    assert api.get(api_url(world, "", release=foreign)).status_code == 404
    assert page.get(page_url(world, "", release=foreign)).status_code == 404
    # Files are for managers: an adjudicator's role is refused before any lookup (403).
    expected = 404 if role == "manager" else 403
    for suffix in ("files/labels.jsonl", f"files/{ARCHIVE}", "files/manifest.json"):
        assert api.get(api_url(world, suffix, release=foreign)).status_code == expected
        assert page.get(page_url(world, suffix, release=foreign)).status_code == expected
    # and it cannot be named as a parent or a tag's target either (a bad field, not found)
    if role == "manager":
        freeze = api.post(
            f"/api/projects/{world.a.slug}/releases/",
            {"version": "2", "parent": foreign.pk},
            format="json",
        )
        tag = api.post(
            f"/api/projects/{world.a.slug}/release-tags/",
            {"name": "latest", "release": foreign.pk},
            format="json",
        )
        assert (freeze.status_code, freeze.json()["field"]) == (400, "parent")
        assert (tag.status_code, tag.json()["field"]) == (400, "release")
        assert not ReleaseTag.objects.filter(project=world.a).exists()


@pytest.mark.parametrize("release_id", [0, MAX_ID, MAX_ID + 1, 2**64])
def test_release_ids_out_of_range_are_404(world, release_id):
    api, page = api_as(world, "manager"), page_as(world, "manager")
    base = f"/api/projects/{world.a.slug}/releases/{release_id}/"
    pages = f"/p/{world.a.slug}/releases/{release_id}/"

    assert api.get(base).status_code == 404
    assert api.get(base + "files/labels.jsonl").status_code == 404
    assert api.post(base + "rebuild/").status_code == 404
    assert page.get(pages).status_code == 404
    assert page.get(pages + "files/labels.jsonl").status_code == 404


def test_non_members_get_404(world):
    api, page = api_as(world, "other_member"), page_as(world, "other_member")

    assert api.get(api_url(world)).status_code == 404
    assert page.get(page_url(world, "files/labels.jsonl")).status_code == 404


# ---------------------------------------------------------------------------------------------
# Downloads
# ---------------------------------------------------------------------------------------------


def test_adjudicators_see_releases_but_cannot_download_files(world):
    build = build_of(world.releases["a"])
    api, page = api_as(world, "adjudicator"), page_as(world, "adjudicator")
    assert api.get(api_url(world, "")).status_code == 200
    detail = page.get(page_url(world, ""))
    assert detail.status_code == 200
    assert b"Only managers download release files" in detail.content
    for name in [entry["name"] for entry in build.files] + [ARCHIVE]:
        assert api.get(api_url(world, f"files/{name}")).status_code == 403
        assert page.get(page_url(world, f"files/{name}")).status_code == 403


@pytest.mark.parametrize("role", ["manager"])
def test_every_downloaded_file_equals_the_stored_bytes(world, role):
    build = build_of(world.releases["a"])
    names = [entry["name"] for entry in build.files] + [ARCHIVE]
    assert {MANIFEST, LABELS_JSONL} <= set(names)
    api, page = api_as(world, role), page_as(world, role)

    for name in names:
        stored = stored_bytes(build, name)
        for response in (
            api.get(api_url(world, f"files/{name}")),
            page.get(page_url(world, f"files/{name}")),
        ):
            assert response.status_code == 200, name
            assert body(response) == stored, name
            assert response["Content-Type"].split(";")[0] == MEDIA_TYPES[name]
            assert response["Content-Disposition"].startswith("attachment;")
            assert response["X-Content-SHA256"] == hashlib.sha256(stored).hexdigest()
    listed = {entry["name"]: entry["sha256"] for entry in build.files}
    assert listed[LABELS_JSONL] == hashlib.sha256(stored_bytes(build, LABELS_JSONL)).hexdigest()
    assert build.archive_sha256 == hashlib.sha256(stored_bytes(build, ARCHIVE)).hexdigest()


def test_the_archive_downloads_under_the_release_name(world):
    response = page_as(world, "manager").get(page_url(world, f"files/{ARCHIVE}"))

    assert response.status_code == 200
    assert 'filename="study-1.zip"' in response["Content-Disposition"]
    with zipfile.ZipFile(io.BytesIO(body(response))) as archive:
        assert f"study-1/{MANIFEST}" in archive.namelist()


def test_a_download_answers_whatever_the_client_accepts(world):
    response = api_as(world, "manager").get(
        api_url(world, f"files/{ARCHIVE}"), HTTP_ACCEPT="application/zip"
    )

    assert response.status_code == 200


@pytest.mark.parametrize(
    "name",
    [
        "..",
        ".",
        "%2e%2e",
        "..%2F..%2Fsettings.py",
        "..%2Fmanifest.json",
        "%2E%2E%5Cmanifest.json",
        ".%2Flabels.jsonl",
        "LABELS.JSONL",
        "labels.jsonl%00",
        "labels.jsonl.",
        "cutoff.json",
        "%2Fetc%2Fpasswd",
    ],
)
def test_a_file_name_the_build_does_not_list_is_404(world, name):
    api, page = api_as(world, "manager"), page_as(world, "manager")

    assert api.get(api_url(world, f"files/{name}")).status_code == 404
    assert page.get(page_url(world, f"files/{name}")).status_code == 404


def test_files_are_404_until_the_build_is_done(world):
    client = api_as(world, "manager")
    created = client.post(
        f"/api/projects/{world.a.slug}/releases/", {"version": "2"}, format="json"
    ).json()
    release = Release.objects.get(pk=created["id"])

    assert client.get(api_url(world, "files/labels.jsonl", release=release)).status_code == 404
    assert created["files"] == [] and created["counts"] is None

    built(release)
    detail = client.get(api_url(world, release=release)).json()

    assert detail["build"]["status"] == "done"
    assert {f["name"] for f in detail["files"]} >= {MANIFEST, LABELS_JSONL, ARCHIVE}
    labels = next(f for f in detail["files"] if f["name"] == LABELS_JSONL)
    assert labels["url"] == api_url(world, "files/labels.jsonl", release=release)
    assert client.get(labels["url"]).status_code == 200
    assert detail["counts"]["overall"]["items"]["count"] > 0


# ---------------------------------------------------------------------------------------------
# Tags
# ---------------------------------------------------------------------------------------------


def test_a_tag_moves_between_releases_and_keeps_its_history(world):
    client = api_as(world, "manager")
    tags_url = f"/api/projects/{world.a.slug}/release-tags/"
    first = world.releases["a"]
    second_id = client.post(
        f"/api/projects/{world.a.slug}/releases/", {"version": "2"}, format="json"
    ).json()["id"]

    created = client.post(tags_url, {"name": "latest", "release": first.pk}, format="json")
    moved = client.post(tags_url, {"name": "latest", "release": second_id}, format="json")
    again = client.post(tags_url, {"name": "latest", "release": second_id}, format="json")
    listed = api_as(world, "adjudicator").get(tags_url).json()

    assert (created.status_code, moved.status_code, again.status_code) == (200, 200, 200)
    assert moved.json()["release"] == second_id and moved.json()["release_version"] == "2"
    assert [(m["previous"], m["release"]) for m in listed[0]["moves"]] == [
        (None, first.pk),
        (first.pk, second_id),
    ]
    assert client.get(api_url(world, release=first)).json()["tags"] == []
    assert ReleaseTagMove.objects.count() == 2


def test_a_tag_is_moved_from_the_release_page(world):
    page = page_as(world, "manager")
    release = world.releases["a"]

    response = page.post(page_url(world, "tags/"), {"name": "paper-v1"}, follow=True)

    assert response.status_code == 200
    assert ReleaseTag.objects.get(project=world.a, name="paper-v1").release == release
    assert 'data-tag="paper-v1"' in response.content.decode()


@pytest.mark.parametrize("name", ["Latest", "-x", "a/b", "", "x" * 65])
def test_a_bad_tag_name_is_refused(world, name):
    response = api_as(world, "manager").post(
        f"/api/projects/{world.a.slug}/release-tags/",
        {"name": name, "release": world.releases["a"].pk},
        format="json",
    )

    assert response.status_code == 400
    assert not ReleaseTag.objects.exists()


def test_adjudicators_read_but_cannot_write(world):
    api, page = api_as(world, "adjudicator"), page_as(world, "adjudicator")
    tags_url = f"/api/projects/{world.a.slug}/release-tags/"

    assert api.get(f"/api/projects/{world.a.slug}/releases/").status_code == 200
    assert api.post(tags_url, {"name": "x", "release": world.releases["a"].pk}).status_code == 403
    assert api.post(f"/api/projects/{world.a.slug}/releases/", {"version": "2"}).status_code == 403
    assert api.post(api_url(world, "rebuild/")).status_code == 403
    assert page.post(page_url(world, "tags/"), {"name": "x"}).status_code == 403
    assert page.post(f"/p/{world.a.slug}/releases/", {"version": "2"}).status_code == 403
    assert Release.objects.filter(project=world.a).count() == 1
    assert not ReleaseTag.objects.exists()
    list_page = page.get(f"/p/{world.a.slug}/releases/").content.decode()
    assert 'id="freeze-form"' not in list_page
    assert 'id="rebuild"' not in page.get(page_url(world)).content.decode()


# ---------------------------------------------------------------------------------------------
# Pages: freeze form, progress, detail, rebuild and compare
# ---------------------------------------------------------------------------------------------


def test_the_freeze_form_is_prefilled_and_freezes(world):
    page = page_as(world, "manager")
    url = f"/p/{world.a.slug}/releases/"
    release = world.releases["a"]

    form = page.get(url)
    html = form.content.decode()

    assert form.status_code == 200
    assert form.context["form"].initial == {
        "version": "2",
        "parent": release.pk,
        "runs": [world.runs["a"].pk],
    }
    assert 'data-release="1"' in html
    response = page.post(
        url,
        {"version": "2", "parent": str(release.pk), "runs": [str(world.runs["a"].pk)]},
    )
    new = Release.objects.get(project=world.a, version="2")
    assert response.status_code == 302
    assert response["Location"] == page_url(world, release=new)
    assert new.parent == release and new.certifies[0]["run"]["id"] == world.runs["a"].pk
    # while the build is pending, both pages show its progress and update it from the JSON
    assert 'data-poll-path="results.*.build" data-poll-ms="3000"' in page.get(url).content.decode()
    detail = page.get(page_url(world, release=new)).content.decode()
    assert 'data-build-status="pending"' in detail and 'data-poll-path="builds.*"' in detail
    built(new)
    detail = page.get(page_url(world, release=new)).content.decode()
    assert "data-poll-url" not in detail
    assert 'data-build-status="done"' in detail
    assert build_of(new).manifest_sha256 in detail
    assert 'id="release-counts"' in detail and 'data-count="items"' in detail


@pytest.mark.parametrize(
    ("data", "field"),
    [({"version": "1"}, "version"), ({"version": "v2"}, "version"), ({"version": "0"}, "version")],
)
def test_a_refused_freeze_shows_the_error_on_its_field(world, data, field):
    page = page_as(world, "manager")

    response = page.post(
        f"/p/{world.a.slug}/releases/", {**data, "parent": str(world.releases["a"].pk)}
    )

    assert response.status_code == 400
    assert response.context["form"].errors.get(field)
    assert Release.objects.filter(project=world.a).count() == 1


def test_rebuild_and_compare_from_the_page(world):
    page = page_as(world, "manager")
    release = world.releases["a"]

    response = page.post(page_url(world, "rebuild/"))
    rebuild = ReleaseBuild.objects.get(release=release, is_rebuild=True)
    release_build_execute(build_id=rebuild.pk)
    html = page.get(page_url(world)).content.decode()

    assert response.status_code == 302
    assert f'data-rebuild="{rebuild.pk}"' in html and 'data-matches="true"' in html


def test_the_api_rebuild_is_accepted_then_compared(world):
    client = api_as(world, "manager")

    response = client.post(api_url(world, "rebuild/"))
    second = client.post(api_url(world, "rebuild/"))
    release_build_execute(build_id=response.json()["id"])
    detail = client.get(api_url(world)).json()

    assert response.status_code == 202 and response.json()["is_rebuild"] is True
    assert second.status_code == 409  # one rebuild at a time
    assert [b["matches"] for b in detail["builds"]] == [None, True]


def test_the_dashboard_links_to_the_releases(world):
    html = page_as(world, "adjudicator").get(f"/p/{world.a.slug}/").content.decode()

    assert f'href="/p/{world.a.slug}/releases/"' in html


def test_the_api_freeze_defaults_and_explicit_values(world):
    client = api_as(world, "manager")
    url = f"/api/projects/{world.a.slug}/releases/"

    orphan = client.post(url, {"version": "2", "parent": None, "runs": []}, format="json")
    bad_run = client.post(url, {"version": "3", "runs": [2**62]}, format="json")
    beyond = client.post(url, {"version": "3", "runs": [2**64]}, format="json")
    listed = client.get(url).json()

    assert orphan.status_code == 201
    assert (orphan.json()["parent"], orphan.json()["certifies"]) == (None, [])
    assert (bad_run.status_code, bad_run.json()["field"]) == (400, "runs[0]")
    assert beyond.status_code == 400
    assert [r["version"] for r in listed["results"]] == ["2", "1"]


# ---------------------------------------------------------------------------------------------
# Commands: export_release and verify_release
# ---------------------------------------------------------------------------------------------


def run(command: str, *args: Any) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(command, *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_export_release_freezes_builds_exports_and_verifies(world, tmp_path):
    manager = world.users["manager"].username

    out, err = run(
        "export_release",
        "--project", world.a.slug, "--version", "2", "--user", manager,
        "--notes", "second", "--out", str(tmp_path), "--no-progress",
    )  # fmt: skip

    release = Release.objects.get(project=world.a, version="2")
    build = build_of(release)
    directory = tmp_path / "study-2"
    assert release.parent == world.releases["a"] and release.notes == "second"
    assert build.status == BuildStatus.DONE  # built in this process: no worker needed
    assert f"exported to {directory} (verified)" in out
    for entry in build.files:
        assert (directory / entry["name"]).read_bytes() == stored_bytes(build, entry["name"])
    verified, _ = run("verify_release", str(directory))
    assert verified.startswith("OK: release 2 of study")
    zipped, _ = run("verify_release", str(directory / ARCHIVE))
    assert zipped.startswith("OK: release 2 of study")


def test_export_release_exports_an_existing_release(world, tmp_path):
    out, _ = run(
        "export_release", "--project", world.a.slug, "--version", "1", "--existing",
        "--out", str(tmp_path),
    )  # fmt: skip

    build = build_of(world.releases["a"])
    assert (tmp_path / "study-1" / LABELS_JSONL).read_bytes() == stored_bytes(build, LABELS_JSONL)
    assert Release.objects.filter(project=world.a).count() == 1


def test_export_release_rebuild_compares_every_byte(world):
    manager = world.users["manager"].username
    args = ["--project", world.a.slug, "--version", "1", "--rebuild", "--user", manager]

    out, _ = run("export_release", *args, "--no-progress")
    assert "matches every byte of every file" in out

    # given a stored hash that no longer matches what the release's state builds
    build = build_of(world.releases["a"])
    files = [dict(entry) for entry in build.files]
    labels = next(entry for entry in files if entry["name"] == LABELS_JSONL)
    labels["sha256"] = "0" * 64
    ReleaseBuild.objects.filter(pk=build.pk).update(files=files)
    err = io.StringIO()
    with pytest.raises(CommandError, match="differs from the stored files"):
        call_command("export_release", *args, "--no-progress", stdout=io.StringIO(), stderr=err)
    assert f"{LABELS_JSONL}: rebuilt sha256" in err.getvalue()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--version", "2"], "--user USERNAME is required"),
        (["--version", "2", "--user", "nobody-here"], "no user"),
        (["--version", "2", "--user", "adj-a"], "only a project manager"),
        (["--version", "1", "--user", "mgr-a"], "already exists"),
        (["--version", "9", "--existing"], "no release '9'"),
        (["--version", "1", "--existing", "--notes", "x"], "only when freezing"),
        (["--version", "2", "--user", "mgr-a", "--parent", "7"], "no release '7'"),
    ],
)
def test_export_release_refuses_with_a_reason(world, args, message):
    with pytest.raises(CommandError, match=message):
        run("export_release", "--project", world.a.slug, *args, "--no-progress")
    assert Release.objects.filter(project=world.a).count() == 1


@pytest.fixture
def exported(world, tmp_path) -> Path:
    """Release 1 of the world exported to a directory."""
    run("export_release", "--project", world.a.slug, "--version", "1", "--existing",
        "--out", str(tmp_path))  # fmt: skip
    return tmp_path / "study-1"


def verify_fails(path: Path) -> list[str]:
    err = io.StringIO()
    with pytest.raises(CommandError, match="does not verify"):
        call_command("verify_release", str(path), stdout=io.StringIO(), stderr=err)
    return err.getvalue().splitlines()


def _flip_a_text_byte(path: Path) -> None:
    # a byte inside a text value: the file stays valid JSONL with the same counts
    data = bytearray(path.read_bytes())
    at = data.index(b"bridge")
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def test_verify_release_detects_a_flipped_byte(exported):
    _flip_a_text_byte(exported / LABELS_JSONL)

    problems = verify_fails(exported)

    assert len(problems) == 1
    assert f"{LABELS_JSONL}: sha256 is" in problems[0]


def test_verify_release_detects_a_changed_count(exported):
    manifest = json.loads((exported / MANIFEST).read_text(encoding="utf-8"))
    manifest["counts"]["overall"]["items"]["count"] += 1
    manifest["counts"]["sources"] += 1
    (exported / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")

    problems = verify_fails(exported)

    assert any("counts.overall differ" in p and "items" in p for p in problems)
    assert any("counts.sources is" in p for p in problems)


def test_verify_release_lists_every_difference(exported):
    _flip_a_text_byte(exported / LABELS_JSONL)
    (exported / "sources.jsonl").unlink()
    manifest = json.loads((exported / MANIFEST).read_text(encoding="utf-8"))
    manifest["counts"]["overall"]["claims"]["count"] += 1
    (exported / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")

    problems = "\n".join(verify_fails(exported))

    assert f"{LABELS_JSONL}: sha256 is" in problems
    assert "sources.jsonl: listed in the manifest but missing" in problems
    assert "counts.overall differ" in problems


def test_verify_release_checks_a_zip(exported, tmp_path):
    archive = tmp_path / "changed.zip"
    with zipfile.ZipFile(exported / ARCHIVE) as source, zipfile.ZipFile(archive, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename.endswith(LABELS_JSONL):
                data = data.replace(b"bridge", b"bridgf", 1)
            target.writestr(info, data)

    problems = verify_fails(archive)

    assert any(f"{LABELS_JSONL}: sha256 is" in p for p in problems)


@pytest.mark.parametrize("member", ["../escaped.txt", "/abs.txt", "a/../../escaped.txt"])
def test_verify_release_refuses_a_zip_that_escapes(tmp_path, member):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as target:
        target.writestr(member, b"x")
        target.writestr(MANIFEST, b"{}")

    problems = verify_fails(archive)

    assert any("not a file of the release" in p for p in problems)
    assert not (tmp_path.parent / "escaped.txt").exists()


def test_verify_release_exits_non_zero(exported):
    # through manage.py itself, as a user runs it (no database needed)
    _flip_a_text_byte(exported / LABELS_JSONL)

    result = subprocess.run(
        [sys.executable, "manage.py", "verify_release", str(exported)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )

    assert result.returncode == 1
    assert f"{LABELS_JSONL}: sha256 is" in result.stderr


def test_a_release_rebuilt_in_a_service_matches(world):
    # the rebuild service and the page agree with the command (sanity of the world's build)
    rebuild = release_rebuild(release=world.releases["a"], actor=world.users["manager"])
    done = release_build_execute(build_id=rebuild.pk)

    assert done.matches is True and done.mismatches == []
    assert release_content_build(world.releases["a"]).status == BuildStatus.DONE


def test_freeze_download_verify_tag_and_reimport(world, tmp_path):
    # the "done when": a manager freezes a release, downloads it, verifies it, tags it
    # and re-imports it elsewhere
    from labeling.models import Project, Question

    page, api = page_as(world, "manager"), api_as(world, "manager")
    page.post(f"/p/{world.a.slug}/releases/", {"version": "2", "runs": []})
    release = Release.objects.get(project=world.a, version="2")
    built(release)
    archive = tmp_path / "download.zip"
    archive.write_bytes(body(api.get(api_url(world, f"files/{ARCHIVE}", release=release))))

    verified, _ = run("verify_release", str(archive))
    tagged = api.post(
        f"/api/projects/{world.a.slug}/release-tags/",
        {"name": "paper-v1", "release": release.pk},
        format="json",
    )
    run("import_workload", str(archive), "--project", "copy", "--create", "--format", "release")

    assert verified.startswith("OK: release 2 of study")
    assert tagged.status_code == 200
    copy = Project.objects.get(slug="copy")
    assert (
        Question.objects.filter(project=copy).count()
        == Question.objects.filter(project=world.a).count()
    )
