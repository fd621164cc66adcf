"""The anytime-valid selective-risk test on the run page and in the run API (Django test client).

The project (tests/certification/apply_world.py) has 60 calibration questions whose mode answer
scores 0.95 and is admissible, or (one question in six) scores 0.6 and is inadmissible. The
expected figures are recomputed from the run's own inputs snapshot by the plain loop of the
statistics tests, not read from the result.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from certification.services import calibration_run_execute, calibration_run_request
from labeling.services import project_create
from tests.certification.apply_world import apply_project
from tests.certification.stats.test_anytime_selective import direct
from tests.conftest import module_data
from tests.factories import make_spec

pytestmark = pytest.mark.django_db

PAGE = "/p/study/certification/runs"
API = "/api/projects/study/calibration/runs"


@pytest.fixture(scope="module")
def _study_once(django_db_setup, django_db_blocker, tmp_path_factory):
    """The project, written once per module (``module_data`` in tests/conftest.py)."""
    with module_data(django_db_blocker, tmp_path_factory.mktemp("releases")) as write:
        yield write(lambda: apply_project(project_create(slug="study", name="Study")))


@pytest.fixture
def project(_study_once, db):
    """The module's project; each test runs in a savepoint rolled back after it."""
    return copy.deepcopy(_study_once)


@pytest.fixture
def study(project):
    return project


def _run(project: Any, **fields: Any) -> Any:
    values = {"selector": "mode", "alpha": "0.2", "thresholds": [0.5, 0.9], **fields}
    spec = make_spec(project, **values)
    return calibration_run_execute(run_id=calibration_run_request(spec=spec, trigger="manual").pk)


def _expected(run: Any, *, alpha: float, thresholds: list[float], method: str) -> list[Any]:
    """The plain loop on the snapshot: each question's mode answer (``x``), in snapshot order."""
    scores, losses = [], []
    for question in run.inputs["calibration"]:
        [mode] = [c for c in question["candidates"] if c["answer"] == "x"]
        scores.append(mode["score"])
        losses.append(0.0 if mode["outcome"] == "admissible" else 1.0)
    return direct(
        scores,
        losses,
        thresholds,
        alpha=alpha,
        delta=0.05,
        method=method,
        denominator="accepted_answers",
        seed=run.spec.seed,
    )


@pytest.mark.parametrize(
    ("method", "thresholds", "chosen"),
    [("bonferroni", [0.5, 0.9], 1), ("fixed_sequence", [0.9, 0.5], 0)],
)
def test_the_page_shows_when_the_evidence_allowed_stopping(
    study, login, method, thresholds, chosen
):
    # given a run whose fixed-n certificate chooses t = 0.9 (50 accepted, no error); with fixed
    # sequence it comes first, as t = 0.5 (risk 1/6, p = 0.3) fails
    run = _run(study, multiplicity=method, thresholds=thresholds)
    expected = _expected(run, alpha=0.2, thresholds=thresholds, method=method)
    stopped_at = expected[chosen][2]
    assert run.result["selective_risk"]["chosen_threshold"] == 0.9
    assert stopped_at is not None and stopped_at < 60
    # when an adjudicator opens the run page
    body = login("adjudicator").get(f"{PAGE}/{run.pk}/").content.decode()
    # then the fixed-n figure is labelled the default and the anytime one says when it stopped
    evidence = "40" if method == "bonferroni" else "20"
    assert "<strong>Fixed-n</strong> (the default" in body
    assert "<strong>Anytime-valid</strong> (time-uniform)" in body
    assert (
        f"the evidence reached {evidence} after {stopped_at} of 60 units</strong>, so labelling "
        "in this order could have stopped there." in body
    )
    assert "Order: numpy.random.default_rng(seed).permutation(n)" in body
    assert 'id="anytime-table"' in body
    assert f"<td>certified after {stopped_at} units</td>" in body


def test_the_page_says_when_the_anytime_test_does_not_allow_stopping_yet(study, login):
    # given alpha 0.1 and t = 0.9 alone: the fixed-n test certifies (0.9^50 = 0.005 <= 0.05),
    # but 50 accepted answers without error cannot lift the wealth to 20 (each at most x1.056)
    run = _run(study, alpha="0.1", thresholds=[0.9])
    [(log_wealth, crossed, _)] = _expected(run, alpha=0.1, thresholds=[0.9], method="bonferroni")
    assert run.result["selective_risk"]["chosen_threshold"] == 0.9 and crossed is None
    body = login("manager").get(f"{PAGE}/{run.pk}/").content.decode()
    wealth = run.result["selective_risk"]["anytime"]["chosen"]["wealth"]
    assert wealth == pytest.approx(2.718281828459045**log_wealth)
    assert "The anytime test does not allow stopping yet:</strong>" in body
    assert f"evidence is {wealth:.4g} after all 60 units, short of 20" in body
    assert "The fixed-n certificate above holds at this n." in body


def test_a_run_without_an_operating_point_says_so(study, login):
    run = _run(study, alpha="0.01", thresholds=[0.5])
    assert run.result["selective_risk"]["chosen_index"] is None
    body = login("adjudicator").get(f"{PAGE}/{run.pk}/").content.decode()
    assert "No fixed-n operating point to test; 0 of 1 thresholds reached the evidence 20." in body


def test_the_run_api_returns_the_anytime_test(study, api):
    # given a both run at alpha 0.2 with thresholds 0.5 (risk 1/6, not certified) and 0.9
    run = _run(study, method="both")
    expected = _expected(run, alpha=0.2, thresholds=[0.5, 0.9], method="bonferroni")
    # when an adjudicator reads its report
    response = api("adjudicator").get(f"{API}/{run.pk}/")
    assert response.status_code == 200
    anytime = response.json()["result"]["selective_risk"]["anytime"]
    # then the anytime test is there, with its kind, level, order and rows
    assert anytime["kind"] == "anytime-valid"
    assert anytime["multiplicity"] == "bonferroni"
    assert anytime["level"] == pytest.approx(0.025) and anytime["evidence_threshold"] == 40
    assert (anytime["n"], anytime["seed"]) == (60, 0)
    assert [(r["threshold"], r["crossed_at"], r["certified_at"]) for r in anytime["rows"]] == [
        (t, e[1], e[2]) for t, e in zip([0.5, 0.9], expected, strict=True)
    ]
    assert anytime["certified_indices"] == [1]
    assert anytime["chosen"] == anytime["rows"][1]
    assert response.json()["run"]["stats_version"] == 5
