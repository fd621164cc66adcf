"""The API's token endpoint: credentials in, a new named expiring token out; throttled and locked
out like logins."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from labeling.models import ApiToken
from labeling.services.tokens import token_digest

PASSWORD = "Zed-long-secret-42"  # noqa: S105
URL = "/api/auth/token/"


@pytest.fixture
def zed(db: None) -> Any:
    return get_user_model().objects.create_user("zed", password=PASSWORD)


def test_right_credentials_give_a_new_named_expiring_token_which_authenticates(zed):
    client = APIClient()
    body = {"username": "zed", "password": PASSWORD, "name": "nightly export"}
    response = client.post(URL, {**body, "expires_in_days": 7}, format="json")
    assert response.status_code == 200
    out = response.json()
    token = ApiToken.objects.get(user=zed)
    assert (out["id"], out["name"], out["state"]) == (token.pk, "nightly export", "active")
    # only the hash of the secret is stored, and its first 8 characters
    assert token.digest == token_digest(out["token"]) != out["token"]
    assert token.prefix == out["token"][:8] == out["prefix"]
    assert (token.expires_at - token.created_at).days == 7
    client.credentials(HTTP_AUTHORIZATION=f"Token {out['token']}")
    assert client.get("/api/projects/").status_code == 200
    # a second call makes a second token (the default name, 30 days); the first still works
    second = APIClient().post(URL, {"username": "zed", "password": PASSWORD}, format="json")
    assert second.json()["name"] == "API token"
    assert second.json()["token"] != out["token"]
    assert ApiToken.objects.filter(user=zed).count() == 2
    assert client.get("/api/projects/").status_code == 200


def test_a_bad_lifetime_is_400_and_makes_no_token(zed):
    body = {"username": "zed", "password": PASSWORD, "expires_in_days": 366}
    response = APIClient().post(URL, body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "expires_in_days"
    assert not ApiToken.objects.exists()


def test_wrong_password_is_400(zed):
    response = APIClient().post(URL, {"username": "zed", "password": "no"}, format="json")
    assert response.status_code == 400
    assert not ApiToken.objects.filter(user=zed).exists()


def test_token_endpoint_is_throttled_per_address_at_the_configured_rate(zed):
    # the default scope rate is 10/minute; different usernames so no lockout interferes
    client = APIClient()
    statuses = [
        client.post(URL, {"username": f"u{i}", "password": "no"}, format="json").status_code
        for i in range(10)
    ]
    assert statuses == [400] * 10
    response = client.post(URL, {"username": "zed", "password": PASSWORD}, format="json")
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert not ApiToken.objects.filter(user=zed).exists()
    # another address has its own budget
    other = APIClient(REMOTE_ADDR="10.9.9.9")
    response = other.post(URL, {"username": "zed", "password": PASSWORD}, format="json")
    assert response.status_code == 200


def test_the_token_budget_holds_across_processes(zed):
    # given an address that spent its 10 requests of the minute
    client = APIClient()
    for i in range(10):
        client.post(URL, {"username": f"u{i}", "password": "no"}, format="json")
    # when the next request reaches a process whose memory holds no counter (a new process:
    # the default cache is per process)
    cache.clear()
    response = client.post(URL, {"username": "zed", "password": PASSWORD}, format="json")
    # then it is still refused: the counter lives in the cache every process shares (the
    # database table certlabel_cache, Redis is not configured)
    assert response.status_code == 429
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM certlabel_cache")
        assert cursor.fetchone()[0] >= 1


def test_wrong_passwords_lock_the_token_endpoint_out_too(zed, settings):
    settings.AXES_FAILURE_LIMIT = 3
    client = APIClient()
    assert [
        client.post(URL, {"username": "zed", "password": "no"}, format="json").status_code
        for _ in range(3)
    ] == [400, 400, 429]
    response = client.post(URL, {"username": "zed", "password": PASSWORD}, format="json")
    assert response.status_code == 429
    assert "Too many failed logins" in response.json()["detail"]
    assert not ApiToken.objects.filter(user=zed).exists()


def test_anonymous_and_user_requests_have_general_rates(zed, monkeypatch):
    # the rates come from CERTLABEL_THROTTLE_ANON / _USER at start-up (tests/test_settings.py);
    # here they are made small to reach them
    monkeypatch.setattr(
        SimpleRateThrottle, "THROTTLE_RATES", {"anon": "3/minute", "user": "4/minute"}
    )
    anonymous = APIClient()
    assert [anonymous.get("/api/schema/").status_code for _ in range(4)] == [200, 200, 200, 429]
    user = APIClient()
    user.force_authenticate(zed)
    assert [user.get("/api/projects/").status_code for _ in range(5)] == [200] * 4 + [429]
    assert int(user.get("/api/projects/")["Retry-After"]) > 0
