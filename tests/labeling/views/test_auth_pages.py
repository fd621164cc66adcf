"""Login and logout through django.contrib.auth, with the project's templates."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_login_page_renders_form(client):
    response = client.get(reverse("login"))

    assert response.status_code == 200
    assert b'name="username"' in response.content
    assert b'name="password"' in response.content


def test_login_with_valid_password_redirects_to_project_list(client):
    # given a user
    user = UserFactory()

    # when they log in
    response = client.post(reverse("login"), {"username": user.username, "password": "pw-secret"})

    # then they land on their projects
    assert response.status_code == 302
    assert response["Location"] == reverse("project-list")


def test_login_with_wrong_password_shows_error(client):
    user = UserFactory()

    response = client.post(reverse("login"), {"username": user.username, "password": "nope"})

    assert response.status_code == 200
    assert b"did not match" in response.content


def test_anonymous_page_request_redirects_to_login_with_next(client):
    response = client.get("/p/study/items/")

    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next=/p/study/items/"


def test_logout_is_a_post_form_in_the_header(client):
    client.force_login(UserFactory())

    page = client.get(reverse("project-list"))
    response = client.post(reverse("logout"))

    assert f'action="{reverse("logout")}"'.encode() in page.content
    assert response.status_code == 302
    assert client.get(reverse("project-list")).status_code == 302
