"""Login lockout (django-axes): N wrong passwords lock the username from that address.

Real requests through the login page; the limit is set small per test (the setting is read on
every login, ``CERTLABEL_LOGIN_FAILURE_LIMIT`` in production).
"""

from __future__ import annotations

from typing import Any

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

PASSWORD = "Zed-long-secret-42"  # noqa: S105
LOCKED = "Too many failed logins (3) for this account from your address"


@pytest.fixture
def zed(db: None, settings: Any) -> Any:
    settings.AXES_FAILURE_LIMIT = 3
    return get_user_model().objects.create_user("zed", password=PASSWORD)


def login(client: Client, password: str, address: str = "10.0.0.1") -> Any:
    return client.post(
        "/accounts/login/", {"username": "zed", "password": password}, REMOTE_ADDR=address
    )


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_wrong_passwords_then_the_right_one_is_refused_with_the_message(zed):
    client = Client()
    for _ in range(2):
        response = login(client, "wrong")
        assert response.status_code == 200
        assert "did not match" in response.content.decode()
    # the third wrong password reaches the limit
    response = login(client, "wrong")
    assert response.status_code == 429
    assert LOCKED in response.content.decode()
    # the right password is refused now, with the same message, and logs nobody in
    response = login(client, PASSWORD)
    assert response.status_code == 429
    body = response.content.decode()
    assert LOCKED in body
    assert "blocked for 0:15:00" in body
    assert not logged_in(client)
    assert AccessAttempt.objects.get(username="zed").failures_since_start == 4


def test_fewer_failures_than_the_limit_still_log_in_and_reset_the_count(zed):
    client = Client()
    login(client, "wrong")
    login(client, "wrong")
    response = login(client, PASSWORD)
    assert response.status_code == 302
    assert logged_in(client)
    assert not AccessAttempt.objects.filter(username="zed").exists()


def test_the_limit_is_configurable(zed, settings):
    settings.AXES_FAILURE_LIMIT = 1
    client = Client()
    assert login(client, "wrong").status_code == 429
    assert login(client, PASSWORD).status_code == 429


def test_the_lockout_is_per_address(zed):
    client = Client()
    for _ in range(3):
        login(client, "wrong", address="10.0.0.1")
    assert login(Client(), PASSWORD, address="10.0.0.2").status_code == 302


def test_unlock_command_lets_the_right_password_in(zed):
    client = Client()
    for _ in range(3):
        login(client, "wrong")
    assert login(client, PASSWORD).status_code == 429
    call_command("axes_reset_username", "zed")
    response = login(client, PASSWORD)
    assert response.status_code == 302
    assert logged_in(client)


def test_unlock_in_the_admin_by_deleting_the_access_attempt(zed):
    client = Client()
    for _ in range(3):
        login(client, "wrong")
    admin = get_user_model().objects.create_superuser("root", password=PASSWORD)
    staff = Client()
    staff.force_login(admin)
    attempt = AccessAttempt.objects.get(username="zed")
    changelist = staff.get("/admin/axes/accessattempt/")
    assert changelist.status_code == 200
    assert "zed" in changelist.content.decode()
    response = staff.post(f"/admin/axes/accessattempt/{attempt.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert login(client, PASSWORD).status_code == 302


def test_test_client_login_without_a_request_still_works(zed):
    client = Client()
    assert client.login(username="zed", password=PASSWORD)
    assert not client.login(username="zed", password="wrong")


def test_one_wrong_password_for_each_of_many_accounts_locks_the_address_out(zed, settings):
    # given an address limit of 4 wrong passwords, any usernames (each account below its own)
    settings.CERTLABEL_LOGIN_ADDRESS_FAILURE_LIMIT = 4
    for n in range(4):
        Client().post(
            "/accounts/login/",
            {"username": f"user{n}", "password": "guess"},
            REMOTE_ADDR="10.0.0.1",
        )
    # when zed logs in with the right password from that address, and from another one
    sprayed, elsewhere = Client(), Client()
    refused = login(sprayed, PASSWORD, address="10.0.0.1")
    # then the sprayed address is refused with the lockout, the other address logs in
    assert refused.status_code == 429
    assert not logged_in(sprayed)
    assert login(elsewhere, PASSWORD, address="10.0.0.2").status_code == 302
    assert logged_in(elsewhere)
