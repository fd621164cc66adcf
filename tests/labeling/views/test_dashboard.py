"""The project dashboard: progress by role, the agreement panel, links by role."""

from __future__ import annotations

import pytest
from django.urls import reverse

from labeling.models import Role
from labeling.views import panels
from labeling.views.panels import dashboard_panel_register
from tests.labeling.views.conftest import claim_next, form_url, labels_post

pytestmark = pytest.mark.django_db

DASHBOARD = reverse("project-detail", args=["study"])


@pytest.fixture
def agreement_panel(monkeypatch):
    """The agreement panel as ``certification`` registers it (see labeling/views/panels.py).

    The registry is swapped for a copy, so the panels the apps registered are back afterwards
    (unregistering the real one broke later dashboard tests).
    """
    from certification.selectors import agreement_report_get

    monkeypatch.setattr(panels, "_PANELS", dict(panels._PANELS))
    dashboard_panel_register(
        name="agreement",
        template="certification/_agreement.html",
        context=lambda *, project, actor: {
            "agreement": agreement_report_get(project=project, actor=actor)
        },
    )
    yield


@pytest.fixture
def worked(client, started, member):
    """Two annotators agree on q1/c0 (consensus); then both hold a lease on q1/c1 (the page
    serves the next item after a submit)."""
    for _ in range(2):
        user = member(Role.ANNOTATOR)
        assignment = claim_next(started, user)
        client.force_login(user)
        assert client.post(form_url(assignment), labels_post(assignment.item)).status_code == 302
    client.logout()
    return started


@pytest.mark.parametrize("role", [Role.MANAGER, Role.ADJUDICATOR])
def test_managers_and_adjudicators_see_progress_counts(login, worked, role):
    response = login(role).get(DASHBOARD)

    progress = response.context["progress"]
    # 4 items: q1/c0 resolved by consensus, q1/c1 leased twice, q2's two untouched
    assert progress.total == 4
    assert progress.resolved_consensus == 1
    assert progress.in_progress == 1
    assert progress.open_untouched == 2
    content = response.content.decode()
    assert 'id="progress"' in content
    assert '<td class="num" data-count="resolved_consensus">1</td>' in content
    assert '<td class="num" data-count="total">4</td>' in content


def test_an_annotator_sees_only_their_own_progress(client, worked, member):
    annotator = member(Role.ANNOTATOR)
    assignment = claim_next(worked, annotator)
    client.force_login(annotator)
    client.post(form_url(assignment), labels_post(assignment.item))

    response = client.get(DASHBOARD)

    content = response.content.decode()
    assert response.context["progress"] is None
    assert 'id="progress"' not in content
    assert "Awaiting adjudication" not in content
    assert "You have submitted <strong>1</strong> item." in content
    assert reverse("annotate-next", args=["study"]) in content
    assert reverse("my-annotations", args=["study"]) in content


def test_agreement_panel_for_managers_and_adjudicators_only(login, worked, agreement_panel):
    manager = login(Role.MANAGER).get(DASHBOARD).content.decode()
    adjudicator = login(Role.ADJUDICATOR).get(DASHBOARD).content.decode()
    annotator = login(Role.ANNOTATOR).get(DASHBOARD).content.decode()

    assert 'id="panel-agreement"' in manager and "Inter-annotator agreement" in manager
    assert 'id="panel-agreement"' in adjudicator
    assert "agreement" not in annotator.lower()


@pytest.mark.parametrize(
    ("role", "present", "absent"),
    [
        (
            Role.ANNOTATOR,
            ["annotate-next", "my-annotations"],
            ["adjudication-queue", "project-settings"],
        ),
        (Role.ADJUDICATOR, ["adjudication-queue"], ["annotate-next", "project-settings"]),
        (
            Role.MANAGER,
            ["adjudication-queue", "project-settings", "project-members", "import-create"],
            ["annotate-next"],
        ),
    ],
)
def test_links_by_role(login, started, role, present, absent):
    content = login(role).get(DASHBOARD).content.decode()

    assert (
        f'<span class="badge" id="nav-role" title="your role in this project">{role}</span>'
        in content
    )
    for name in present:
        assert reverse(name, args=["study"]) in content
    for name in absent:
        assert reverse(name, args=["study"]) not in content


def test_dashboard_before_labelling_says_it_has_not_started(login, project):
    content = login(Role.MANAGER).get(DASHBOARD).content.decode()

    assert 'id="labelling-not-started"' in content
    assert reverse("project-settings", args=["study"]) in content
