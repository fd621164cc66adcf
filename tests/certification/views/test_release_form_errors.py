"""The release freeze page places a service error on the field the error names."""

from __future__ import annotations

import pytest
from django.urls import reverse

from certification.services.releases import release_freeze
from labeling.models import Role

pytestmark = pytest.mark.django_db


def test_a_taken_version_is_shown_on_the_version_field(login, project, member):
    # the message does not begin with the field's name: the page reads the error's field
    release_freeze(project=project, actor=member(Role.MANAGER), version="1")

    response = login(Role.MANAGER).post(
        reverse("release-list", args=[project.slug]), {"version": "1", "notes": ""}
    )

    assert response.status_code == 400
    form = response.context["form"]
    assert {name: list(errors) for name, errors in form.errors.items()} == {
        "version": ["release 1 already exists"]
    }
    assert b"release 1 already exists" in response.content
