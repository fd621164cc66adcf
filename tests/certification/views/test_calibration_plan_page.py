"""The label budget plan on the spec page, through the Django test client."""

from __future__ import annotations

import copy
import html
import math
import re

import pytest
from scipy.stats import binom

from certification.stats.errors import StatsError
from labeling.services import project_create
from tests.conftest import module_data
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_project, make_spec
from tests.factories import calibration_record as rec

pytestmark = pytest.mark.django_db

BASE = "/p/study/certification"


@pytest.fixture(scope="module")
def _data_once(django_db_setup, django_db_blocker, tmp_path_factory):
    """:func:`_data`, written once per module (``module_data`` in tests/conftest.py)."""
    with module_data(django_db_blocker, tmp_path_factory.mktemp("releases")) as write:
        yield write(lambda: _data(project_create(slug="study", name="Study")))


@pytest.fixture
def project(_data_once, db):
    """The module's project; each test runs in a savepoint rolled back after it."""
    return copy.deepcopy(_data_once)


def _data(project):
    """20 resolved calibration questions, one wrong; 5 test questions."""
    right = [rec(f"c{i}", [cand("a", answer="x", score=0.9, selected=True)]) for i in range(19)]
    wrong = [rec("w", [cand("a", answer="x", score=0.9, selected=True, label="inadmissible")])]
    test = [rec(f"t{i}", [cand("a", answer="x", score=0.9, selected=True)]) for i in range(5)]
    return calibration_project(project, {"calibration": right + wrong, "test": test})


def text(response):
    page = re.sub(r"<[^>]+>", " ", response.content.decode())
    return re.sub(r"\s+", " ", html.unescape(page)).strip()


def first_passing(n, k, alpha, level):
    return next(
        more
        for more in range(10_000)
        if binom.cdf(math.ceil(k * (n + more) / n), n + more, alpha) <= level
    )


def chance(more, n=20, k=1, alpha=0.1, level=0.05 / 3):
    """P(certify with ``more`` units) when every unit is accepted: Bin(more, k/n) new errors."""
    total = n + more
    passing = [e for e in range(total + 1) if binom.cdf(e, total, alpha) <= level]
    return float(binom.cdf(max(passing) - k, more, k / n)) if passing else 0.0


def test_a_manager_reads_how_many_more_labels_a_spec_that_certifies_nothing_needs(project, login):
    # given a spec of three thresholds that certifies nothing on 20 questions with 1 error
    spec = make_spec(project, selector="mode", thresholds=[0.5, 0.7, 0.95])
    response = login("manager").get(f"{BASE}/specs/{spec.pk}/")
    assert response.status_code == 200
    page = text(response)
    needed = first_passing(20, 1, 0.1, 0.05 / 3)
    assert "A plan is not a certificate" in page
    assert (
        f"Nothing certifies on the 20 calibration questions resolved now. If the observed rates "
        f"held, the threshold acceptance_score >= 0.5 would certify with {needed} more resolved "
        f"calibration questions — but only with a chance of {100 * chance(needed):.2f}%"
    ) in page
    # the sizes for an 80 % and a 95 % chance, where the chance (summed here) crosses them
    for target, more in re.findall(r"at least a ([\d.]+)% chance: (\d+) more", page):
        more, target = int(more), float(target) / 100
        assert chance(more) >= target > chance(more - 1)
    assert re.findall(r"at least a ([\d.]+)% chance: (\d+) more", page) == [
        ("80.00", "232"),
        ("95.00", "378"),
    ]
    assert "Even with zero errors a threshold needs at least 39 accepted answers." in page
    # the threshold 0.95 accepts nothing: it never certifies at the observed answer rate
    rows = re.findall(
        r"<tr[^>]*>(.*?)</tr>",
        response.content.decode().split('id="plan-thresholds"')[1].split("</table>")[0],
        re.S,
    )
    last = re.sub(r"<[^>]+>", " ", rows[-1])
    assert "never" in last and "accepts no calibration answer" in last


def test_the_chance_with_more_units_is_shown(project, login):
    spec = make_spec(project, selector="mode", thresholds=[0.5])
    response = login("adjudicator").get(f"{BASE}/specs/{spec.pk}/", {"n_more": "40"})
    assert response.status_code == 200
    page = text(response)
    e_max = max(e for e in range(61) if binom.cdf(e, 60, 0.1) <= 0.05)
    chance = binom.cdf(e_max - 1, 40, 1 / 20)
    assert "Chance with 40 more" in page
    assert f"{100 * chance:.2f}%" in page


def test_a_conformal_spec_shows_when_m_star_becomes_finite(project, login):
    spec = make_spec(project, method="conformal_set", selector="mode", alpha="0.02")
    page = text(login("manager").get(f"{BASE}/specs/{spec.pk}/"))
    # at alpha 0.02 M* needs at least 49 calibration questions; the unsolvable share 1/20 is
    # at least alpha, so it stays infinite at any size
    assert "M* is infinite below 49 calibration questions" in page
    assert "M* stays infinite at any size" in page
    assert "19/21" in page


@pytest.mark.parametrize("value", ["ten", "-3", "100001"])
def test_a_bad_number_is_a_400_with_the_form_error(project, login, value):
    spec = make_spec(project, selector="mode")
    response = login("manager").get(f"{BASE}/specs/{spec.pk}/", {"n_more": value})
    assert response.status_code == 400
    assert "errorlist" in response.content.decode()
    assert "A plan is not a certificate" in text(response)


def test_annotators_do_not_see_the_plan(project, login):
    spec = make_spec(project, selector="mode")
    assert login("annotator").get(f"{BASE}/specs/{spec.pk}/").status_code == 404


def test_a_statistics_error_shows_on_the_page(project, login, monkeypatch):
    spec = make_spec(project, selector="mode")

    def failing(**kwargs):
        raise StatsError("scores must not contain NaN")

    monkeypatch.setattr("certification.certificates.plan.plan_compute", failing)
    response = login("manager").get(f"{BASE}/specs/{spec.pk}/")
    assert response.status_code == 200
    assert "the current labels cannot be planned: scores must not contain NaN" in text(response)


def test_a_bounded_loss_spec_page_says_it_is_not_planned(project, login):
    spec = make_spec(
        project,
        name="bounded",
        loss={"kind": "bounded", "source": "unsupported_claim_share"},
        thresholds=[0.5],
    )
    response = login("manager").get(f"{BASE}/specs/{spec.pk}/")
    assert response.status_code == 200
    assert "the planner covers 0/1 losses" in text(response)
