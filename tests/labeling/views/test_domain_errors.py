"""Domain errors on pages: one status table with the API, and errors placed by their field."""

from __future__ import annotations

from typing import Any

import pytest
from django.http import HttpRequest, HttpResponse
from django.test import override_settings
from django.urls import path, reverse
from django.utils.html import escape

import certification.exceptions
from labeling import exceptions
from labeling.api_errors import exception_handler
from labeling.http_errors import STATUS_BY_ERROR, http_status
from labeling.models import Role
from labeling.urls import urlpatterns as site_urlpatterns

pytestmark = pytest.mark.django_db


def _every_error_class() -> list[type[exceptions.LabelingError]]:
    found: list[type[exceptions.LabelingError]] = [exceptions.LabelingError]
    for cls in found:
        found += [sub for sub in cls.__subclasses__() if sub not in found]
    return found


def _instance(cls: type[exceptions.LabelingError]) -> exceptions.LabelingError:
    """An instance of ``cls`` with a reason and, where the class takes one, a field."""
    if cls is exceptions.WorkloadImportFailed:
        return cls([])
    if cls.__module__ == "certification.exceptions" and cls.__name__.startswith("Invalid"):
        return cls("alpha", "must lie strictly between 0 and 1")  # type: ignore[call-arg]
    return cls("the reason", field="the_field")


ERRORS = {cls.__name__: cls for cls in _every_error_class()}


def _raise(request: HttpRequest, name: str) -> HttpResponse:
    raise _instance(ERRORS[name])


# The site's pages (the layout links to them) plus one view that raises any domain error.
urlpatterns = [path("raise/<str:name>/", _raise), *site_urlpatterns]


def test_the_table_covers_every_domain_error_class_but_the_two_bases():
    classes = _every_error_class()
    outside = {
        cls for cls in classes if not any(issubclass(cls, row) for row, _ in STATUS_BY_ERROR)
    }

    assert len(classes) >= 19  # both apps' errors were found
    # only the bases fall back to the default status (400), pages and API alike
    assert outside == {exceptions.LabelingError, certification.exceptions.CertificationError}
    assert {status for _, status in STATUS_BY_ERROR} == {400, 403, 404, 409}


@override_settings(ROOT_URLCONF=__name__)
@pytest.mark.parametrize("name", sorted(ERRORS))
def test_a_page_and_the_api_answer_a_domain_error_with_the_same_status(client, name):
    error = _instance(ERRORS[name])

    api = exception_handler(error, {})
    page = client.get(f"/raise/{name}/")

    assert api is not None
    assert page.status_code == api.status_code == http_status(error)
    assert api.data["code"] == error.code
    if page.status_code in (400, 409):
        # in the site's layout, with the error's message and code
        body = page.content.decode()
        assert 'class="brand"' in body
        assert f'data-code="{error.code}"' in body
        assert escape(error.message) in body


@override_settings(ROOT_URLCONF=__name__)
def test_the_statuses_are_those_of_the_table(client):
    names = ("NotFound", "PermissionDenied", "InvalidTransition", "Conflict", "InvalidInput")

    statuses = {name: client.get(f"/raise/{name}/").status_code for name in names}

    assert statuses == {
        "NotFound": 404,
        "PermissionDenied": 403,
        "InvalidTransition": 409,
        "Conflict": 409,
        "InvalidInput": 400,
    }


# --- a service error that names a field lands on that form field ---------------------------


def _form_errors(response: Any, form: str) -> dict[str, list[str]]:
    return {name: list(errors) for name, errors in response.context[form].errors.items()}


def test_an_existing_member_is_shown_on_the_invitee_field(login, project, member):
    annotator = member(Role.ANNOTATOR)

    response = login(Role.MANAGER).post(
        reverse("project-members", args=[project.slug]),
        {"action": "invite", "invitee": annotator.username, "role": "manager"},
    )

    assert response.status_code == 400
    errors = _form_errors(response, "invite_form")
    assert list(errors) == ["invitee"]
    assert errors["invitee"] == [
        f"invitee: {annotator.username!r} is already a member of this project; change their "
        "role instead"
    ]


def test_a_missing_serving_seed_is_shown_on_the_seed_field(login, project):
    response = login(Role.MANAGER).post(
        reverse("project-settings", args=[project.slug]),
        {"overlap": "2", "lease_minutes": "30", "serving_order": "seeded_random"},
    )

    assert response.status_code == 400
    assert _form_errors(response, "form") == {
        "serving_seed": ["serving_seed: the seeded_random serving order needs a seed"]
    }
