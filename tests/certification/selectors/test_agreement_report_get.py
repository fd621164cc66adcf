"""agreement_report_get and the dashboard fragment: figures for all, rater names for managers."""

from __future__ import annotations

import pytest
from django.template.loader import render_to_string

from certification.selectors import agreement_report_get
from certification.services import agreement_recompute
from labeling.models import Role
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def report(project, items, cast_vote, prior_vote, member):
    alice, bob = member(Role.ANNOTATOR), member(Role.ANNOTATOR)
    alice.username, bob.username = "alice", "bob"
    alice.save()
    bob.save()
    cast_vote(items[0], alice, "admissible", claims=["supported", "supported"])
    cast_vote(items[0], bob, "admissible", claims=["supported", "supported"])
    cast_vote(items[1], alice, "admissible")
    cast_vote(items[1], bob, "inadmissible")
    prior_vote(items[2], "fb-7", "admissible")
    cast_vote(items[2], alice, "admissible")
    return agreement_recompute(project_id=project.pk)


def test_none_before_the_first_computation(project):
    assert agreement_report_get(project=project) is None


def test_managers_see_rater_names(project, report, member, django_assert_num_queries):
    manager = member(Role.MANAGER)
    with django_assert_num_queries(3):  # report, role, usernames
        view = agreement_report_get(project=project, actor=manager)
    assert view.identities_shown
    answer, claim = view.levels
    assert (answer.level, claim.level) == ("answer", "claim")
    assert [(p.rater_a, p.rater_b, p.n) for p in answer.pairs] == [
        ("fb-7 (imported)", "alice", 1),
        ("alice", "bob", 2),
    ]
    assert answer.n_votes == 6
    assert answer.percent_agreement.value == pytest.approx(2 / 3)
    assert claim.alpha.value is None and claim.alpha.reason == "no variation"


@pytest.mark.parametrize("role", [Role.ANNOTATOR, Role.ADJUDICATOR, None])
def test_others_see_numbered_raters(project, report, member, role):
    actor = member(role) if role else None
    view = agreement_report_get(project=project, actor=actor)
    assert not view.identities_shown
    names = {name for level in view.levels for p in level.pairs for name in (p.rater_a, p.rater_b)}
    assert names == {"Rater 1", "Rater 2", "Rater 3"}


def test_staff_non_member_counts_as_manager(project, report):
    view = agreement_report_get(project=project, actor=UserFactory(is_staff=True))
    assert view.identities_shown


def test_fragment_shows_figures_and_undefined_reasons(project, report, member):
    html = render_to_string(
        "certification/_agreement.html",
        {"agreement": agreement_report_get(project=project, actor=member(Role.MANAGER))},
    )
    assert "Answer labels" in html and "Claim labels" in html
    assert "undefined (no variation)" in html
    assert "0.667" in html  # answer-level percent agreement
    assert "alice" in html and "fb-7 (imported)" in html
    assert "95% CI" in html


def test_fragment_hides_names_from_non_managers(project, report, member):
    html = render_to_string(
        "certification/_agreement.html",
        {"agreement": agreement_report_get(project=project, actor=member(Role.ANNOTATOR))},
    )
    assert "alice" not in html and "bob" not in html and "fb-7" not in html
    assert "Rater 1" in html


def test_fragment_before_any_report():
    html = render_to_string("certification/_agreement.html", {"agreement": None})
    assert "Not computed yet" in html


@pytest.mark.parametrize(
    ("role", "shown", "names"),
    [("manager", True, True), ("adjudicator", True, False), ("annotator", False, False)],
)
def test_dashboard_panel(project, report, login, role, shown, names):
    from django.urls import reverse

    response = login(role).get(reverse("project-detail", args=[project.slug]))
    assert response.status_code == 200
    html = response.content.decode()
    assert ("Inter-annotator agreement" in html) is shown
    assert ("alice" in html) is names
