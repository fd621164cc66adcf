"""A refused role answers 403 before an invalid body would answer 400, in the API and the pages.

The API checks the role a method needs with ``ProjectRolePermission`` (a view's
``project_roles``) before the handler validates; the pages with ``project_for``'s roles before
the form is read. Both call ``labeling.permissions.require_role``, the services' own check.
The manager's answer to the same body shows that the body is invalid indeed.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from labeling.models import Role

pytestmark = pytest.mark.django_db

# (URL name, extra URL kwargs, method, invalid body, a role refused, the manager's status)
API_CASES: list[tuple[str, dict[str, Any], str, dict[str, Any], str, int | None]] = [
    ("api-import-create", {}, "post", {}, Role.ADJUDICATOR, 400),
    ("api-evaluator-label-import", {}, "post", {}, Role.ANNOTATOR, 400),
    ("api-partition-freeze", {}, "post", {"seed": "x"}, Role.ADJUDICATOR, 400),
    ("api-settings", {}, "patch", {"overlap": "x"}, Role.ADJUDICATOR, 400),
    ("api-invitation-list", {}, "post", {"role": "nope"}, Role.ANNOTATOR, 400),
    ("api-member-update", {"user_id": 1}, "patch", {"role": "nope"}, Role.ADJUDICATOR, 400),
    ("api-adjudication-resolve", {"item_id": 1}, "post", {}, Role.ANNOTATOR, 400),
    ("api-adjudication-unresolved", {"item_id": 1}, "post", {}, Role.ANNOTATOR, 400),
    ("api-calibration-spec-list", {}, "post", {"seed": "x"}, Role.ADJUDICATOR, 400),
    ("api-release-tag-list", {}, "post", {}, Role.ADJUDICATOR, 400),
    ("api-release-list", {}, "post", {"notes": 1.5}, Role.ADJUDICATOR, None),
    ("api-audit-detail", {"evaluator_id": 1}, "post", {"confidence": "x"}, Role.ADJUDICATOR, None),
]


@pytest.mark.parametrize(
    ("name", "kwargs", "method", "body", "role", "manager_status"),
    API_CASES,
    ids=[case[0] for case in API_CASES],
)
def test_the_api_refuses_the_role_before_reading_the_body(
    api, project, name, kwargs, method, body, role, manager_status
):
    url = reverse(name, kwargs={"slug": project.slug, **kwargs})
    fmt = "multipart" if name.endswith("import") or name.endswith("import-create") else "json"
    # when a member of a refused role sends an invalid body, the role is refused (403)
    refused = getattr(api(role), method)(url, body, format=fmt)
    assert refused.status_code == 403, refused.content
    assert refused.json()["code"] == "permission_denied"
    # and a manager sending the same body is not refused by role
    answered = getattr(api(Role.MANAGER), method)(url, body, format=fmt)
    assert answered.status_code != 403
    if manager_status is not None:
        assert answered.status_code == manager_status, answered.content


# (URL name, extra URL kwargs, invalid form, a role refused, its status, the manager's status)
PAGE_CASES: list[tuple[str, dict[str, Any], dict[str, Any], str, int, int]] = [
    ("partition-freeze", {}, {"seed": "x"}, Role.ADJUDICATOR, 403, 400),
    ("project-settings", {}, {"overlap": "x"}, Role.ADJUDICATOR, 403, 400),
    ("import-create", {}, {}, Role.ANNOTATOR, 403, 400),
    # certification pages do not exist for annotators (404), adjudicators only read (403)
    ("calibration-spec-new", {}, {"alpha": "x"}, Role.ADJUDICATOR, 403, 400),
    ("calibration-spec-new", {}, {"alpha": "x"}, Role.ANNOTATOR, 404, 400),
]


@pytest.mark.parametrize(
    ("name", "kwargs", "form", "role", "status", "manager_status"),
    PAGE_CASES,
    ids=[f"{case[0]}-{case[3]}" for case in PAGE_CASES],
)
def test_the_pages_refuse_the_role_before_reading_the_form(
    login, project, name, kwargs, form, role, status, manager_status
):
    url = reverse(name, kwargs={"slug": project.slug, **kwargs})
    assert login(role).post(url, form).status_code == status
    login("anonymous").logout()
    assert login(Role.MANAGER).post(url, form).status_code == manager_status


@pytest.mark.parametrize(
    ("name", "role"),
    [("api-progress", Role.ANNOTATOR), ("api-member-list", Role.ADJUDICATOR)],
)
def test_a_head_request_needs_the_roles_of_get(api, project, name, role):
    # HEAD runs the GET handler: the same roles are refused
    url = reverse(name, kwargs={"slug": project.slug})
    assert api(role).head(url).status_code == 403
    assert api(Role.MANAGER).head(url).status_code == 200
