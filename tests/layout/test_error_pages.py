"""403, 404 and 500 pages inside the site's layout (DEBUG off); JSON errors under /api/."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

pytestmark = pytest.mark.django_db

STYLESHEET = "/static/labeling/certlabel.css"


@pytest.fixture(autouse=True)
def _debug_off(settings):
    settings.DEBUG = False


def assert_styled(response, status: int) -> str:
    assert response.status_code == status
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert STYLESHEET in html  # the site's layout, not Django's bare page
    assert f'id="error-page" data-status="{status}"' in html
    assert 'header class="site"' in html
    assert f'href="{reverse("project-list")}"' in html
    return html


def test_an_unknown_page_is_the_styled_404(client, world):
    client.force_login(world.users["annotator"])
    html = assert_styled(client.get("/no-such-page/"), 404)
    assert "This page does not exist" in html
    # the user stays signed in on the page: their name is in the header
    assert world.users["annotator"].username in html


def test_a_project_page_of_another_role_is_the_styled_404(client, world):
    # Certification pages do not exist for annotators (as for a non-member).
    client.force_login(world.users["annotator"])
    assert_styled(client.get(reverse("release-list", args=[world.a.slug])), 404)


def test_a_forbidden_page_is_the_styled_403_with_the_reason(client, world):
    # Adjudicators see the certification pages but may not define a calibration spec.
    client.force_login(world.users["adjudicator"])
    html = assert_styled(client.get(reverse("calibration-spec-new", args=[world.a.slug])), 403)
    assert "You may not open this page" in html
    assert 'id="error-reason"' in html and "manager" in html


@pytest.mark.urls("tests.layout.raising_urls")
def test_a_failing_page_is_the_styled_500_without_database_access(world):
    client = Client(raise_request_exception=False)
    client.force_login(world.users["manager"])
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/test-broken-page/")
    html = assert_styled(response, 500)
    assert "Something went wrong on our side" in html
    # the session and the user are loaded for the view; the page itself reads nothing more
    assert not [q["sql"] for q in queries.captured_queries if "labeling_" in q["sql"]]
    assert "Log out" not in html  # no request context: no user menu, no CSRF token


@pytest.mark.parametrize("path", ["/api/no-such-endpoint/", "/api/projects/no-such-project/"])
def test_api_not_found_stays_json(client, world, path):
    client.force_login(world.users["annotator"])
    response = client.get(path)
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["code"] == "not_found"


@pytest.mark.urls("tests.layout.raising_urls")
def test_an_api_500_stays_json(world):
    client = Client(raise_request_exception=False)
    client.force_login(world.users["manager"])
    response = client.get("/api/test-broken-endpoint/", HTTP_ACCEPT="text/html")
    assert response.status_code == 500
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["code"] == "server_error"


def test_a_form_without_its_csrf_token_is_the_styled_403(world):
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.users["annotator"])
    html = assert_styled(client.post(reverse("annotate-next", args=[world.a.slug])), 403)
    assert "This form could not be accepted" in html


@pytest.mark.parametrize("path", ["/api/docs/", "/api/redoc/", "/api/schema/"])
def test_the_api_docs_answer_every_method_without_a_server_error(client, path):
    # the Swagger page had no OPTIONS answer of its own: a 500 for anyone
    for method in ("get", "head", "options", "post", "delete"):
        status = getattr(client, method)(path).status_code
        assert status in {200, 405}, (method, status)
    assert client.get(path).status_code == 200
