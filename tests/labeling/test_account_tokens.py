"""API tokens of "My account": create, list, revoke, expiry and revocation by password changes,
through the API, the page and the password pages."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from rest_framework.test import APIClient

from labeling.models import ApiToken, TokenRevocation
from labeling.services.tokens import api_token_create

PASSWORD = "Zed-long-secret-42"  # noqa: S105
NEW_PASSWORD = "Another-long-secret-77"  # noqa: S105
TOKENS = "/api/account/tokens/"


@pytest.fixture
def zed(db: None) -> Any:
    return get_user_model().objects.create_user("zed", password=PASSWORD)


@pytest.fixture
def amy(db: None) -> Any:
    return get_user_model().objects.create_user("amy", password=PASSWORD)


def with_token(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


def test_create_list_and_revoke_through_the_api(zed, amy):
    client = with_token(api_token_create(user=zed, name="first").secret)
    created = client.post(TOKENS, {"name": "CI export", "expires_in_days": 90}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert (body["name"], body["state"], body["revoked_reason"]) == ("CI export", "active", "")
    assert body["prefix"] == body["token"][:8]
    stored = ApiToken.objects.get(pk=body["id"])
    assert (stored.expires_at - stored.created_at) == timedelta(days=90)
    assert body["token"] not in {stored.digest, stored.prefix}
    api_token_create(user=amy, name="amy's")

    listed = client.get(TOKENS).json()
    assert listed["count"] == 2  # amy's token is not listed
    assert [t["name"] for t in listed["results"]] == ["CI export", "first"]
    assert all("token" not in t for t in listed["results"])  # the secret is never shown again
    # the token in use has been used just now
    assert listed["results"][1]["last_used_at"] is not None

    assert client.delete(f"{TOKENS}{body['id']}/").status_code == 204
    assert client.delete(f"{TOKENS}{body['id']}/").status_code == 204  # already revoked
    revoked = with_token(body["token"]).get(TOKENS)
    assert revoked.status_code == 401
    assert revoked.json()["code"] == "token_revoked"
    assert "revoked by its owner" in revoked.json()["detail"]
    listed = client.get(TOKENS).json()["results"]
    assert (listed[0]["state"], listed[0]["revoked_reason"]) == ("revoked", "owner")


def test_another_users_token_cannot_be_revoked(zed, amy):
    theirs = api_token_create(user=amy, name="amy's")
    client = with_token(api_token_create(user=zed, name="mine").secret)
    response = client.delete(f"{TOKENS}{theirs.token.pk}/")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert with_token(theirs.secret).get(TOKENS).status_code == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "   "}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "ok", "expires_in_days": 0}, "expires_in_days"),
        ({"name": "ok", "expires_in_days": 366}, "expires_in_days"),
        ({"expires_in_days": 5}, "name"),
    ],
)
def test_bad_token_input_is_400_naming_the_field(zed, body, field):
    client = with_token(api_token_create(user=zed, name="mine").secret)
    response = client.post(TOKENS, body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field
    assert ApiToken.objects.count() == 1


def test_an_expired_token_is_401_with_a_clear_error(zed):
    created = api_token_create(user=zed, name="short", expires_in_days=1)
    client = with_token(created.secret)
    assert client.get("/api/projects/").status_code == 200
    ApiToken.objects.filter(pk=created.token.pk).update(
        created_at=timezone.now() - timedelta(days=2), expires_at=timezone.now()
    )
    response = client.get("/api/projects/")
    assert response.status_code == 401
    body = response.json()
    assert body["code"] == "token_expired"
    assert body["detail"].startswith("this token expired at ")
    assert response["WWW-Authenticate"] == "Token"
    # still listed, as expired, to its owner
    listed = with_token(api_token_create(user=zed, name="new").secret).get(TOKENS).json()
    assert [t["state"] for t in listed["results"]] == ["active", "expired"]


def test_an_unknown_token_is_401(db):
    response = with_token("not-a-token").get("/api/projects/")
    assert response.status_code == 401
    assert response.json()["code"] == "token_invalid"


def test_anonymous_cannot_list_tokens(db):
    assert APIClient().get(TOKENS).status_code == 401


def _assert_all_revoked_by_password(user: Any, secrets: list[str]) -> None:
    for secret in secrets:
        response = with_token(secret).get("/api/projects/")
        assert response.status_code == 401
        assert response.json()["code"] == "token_revoked"
        assert "the password was changed" in response.json()["detail"]
    assert set(ApiToken.objects.filter(user=user).values_list("revoked_reason", flat=True)) == {
        TokenRevocation.PASSWORD_CHANGED
    }


def test_the_password_change_page_revokes_the_users_tokens(zed, amy):
    secrets = [api_token_create(user=zed, name=f"t{i}").secret for i in range(2)]
    others = api_token_create(user=amy, name="amy's").secret
    client = Client()
    client.force_login(zed)
    response = client.post(
        "/accounts/password_change/",
        {"old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )
    assert response.status_code == 302
    _assert_all_revoked_by_password(zed, secrets)
    assert with_token(others).get("/api/projects/").status_code == 200
    # a token made after the change works
    assert with_token(api_token_create(user=zed, name="new").secret).get(TOKENS).status_code == 200


def test_a_password_reset_revokes_the_users_tokens(zed):
    secrets = [api_token_create(user=zed, name="t").secret]
    uid = urlsafe_base64_encode(force_bytes(zed.pk))
    client = Client()
    start = client.get(f"/accounts/reset/{uid}/{default_token_generator.make_token(zed)}/")
    assert start.status_code == 302
    response = client.post(
        start["Location"], {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}
    )
    assert response.status_code == 302
    _assert_all_revoked_by_password(zed, secrets)


def test_set_password_and_changepassword_paths_revoke_too(zed, monkeypatch):
    secrets = [api_token_create(user=zed, name="t").secret]
    zed.set_password(NEW_PASSWORD)
    zed.save()
    _assert_all_revoked_by_password(zed, secrets)


def test_a_login_and_a_rehash_of_the_same_password_revoke_nothing(zed, settings):
    secret = api_token_create(user=zed, name="t").secret
    client = Client()
    assert client.login(username="zed", password=PASSWORD)
    # check_password re-hashes the same password when the preferred hasher changed
    settings.PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.PBKDF2PasswordHasher",
        "django.contrib.auth.hashers.MD5PasswordHasher",
    ]
    user = get_user_model().objects.get(pk=zed.pk)
    before = user.password
    assert user.check_password(PASSWORD)
    assert get_user_model().objects.get(pk=zed.pk).password != before
    assert with_token(secret).get("/api/projects/").status_code == 200


def test_the_account_page_creates_lists_and_revokes(zed, amy):
    api_token_create(user=amy, name="amy-secret-token-name")
    client = Client()
    client.force_login(zed)
    page = client.get("/account/")
    assert page.status_code == 200
    assert b"No tokens yet." in page.content
    assert b"amy-secret-token-name" not in page.content
    created = client.post("/account/", {"name": "laptop", "expires_in_days": "7"})
    assert created.status_code == 200
    assert "no-store" in created["Cache-Control"]
    secret = re.search(r'<code id="token-secret">([^<]+)</code>', created.content.decode())[1]
    token = ApiToken.objects.get(user=zed)
    assert token.name == "laptop"
    assert (token.expires_at - token.created_at) == timedelta(days=7)
    assert with_token(secret).get(TOKENS).status_code == 200
    # the secret is shown once: the next view of the page lists the token without it
    again = client.get("/account/").content.decode()
    assert secret not in again
    assert "laptop" in again and token.prefix in again
    # revoke from the page
    revoked = client.post(f"/account/tokens/{token.pk}/revoke/")
    assert revoked.status_code == 302
    assert with_token(secret).get(TOKENS).status_code == 401
    assert "revoked" in client.get("/account/").content.decode()
    # another user's token: 404, still live
    theirs = ApiToken.objects.get(user=amy)
    assert client.post(f"/account/tokens/{theirs.pk}/revoke/").status_code == 404
    assert ApiToken.objects.get(pk=theirs.pk).revoked_at is None


def test_the_account_page_refuses_a_bad_form_and_anonymous(zed):
    client = Client()
    assert client.get("/account/").status_code == 302  # to the login page
    client.force_login(zed)
    response = client.post("/account/", {"name": "", "expires_in_days": "12"})
    assert response.status_code == 200
    assert not ApiToken.objects.exists()
    assert b"This field is required." in response.content


def test_the_header_links_to_the_account_page(zed):
    client = Client()
    client.force_login(zed)
    assert b'href="/account/" id="nav-account"' in client.get("/").content


def test_tokens_are_stored_hashed_by_the_command_line_too(zed, capsys):
    call_command("api_token_create", "zed", "--name", "cron", "--days", "14")
    secret = capsys.readouterr().out.strip()
    token = ApiToken.objects.get(user=zed)
    assert (token.name, (token.expires_at - token.created_at).days) == ("cron", 14)
    assert secret != token.digest
    assert with_token(secret).get(TOKENS).status_code == 200
