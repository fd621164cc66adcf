"""The run page's coverage sections with tied rank scores and an infinite M* (test client)."""

from __future__ import annotations

import math
import re

import pytest

from certification.charts import conformal_coverage_chart, conformal_set_size_chart
from certification.services import calibration_run_execute, calibration_run_request
from certification.stats.coverage import tied_split_coverage
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_project, make_spec
from tests.factories import calibration_record as rec

pytestmark = pytest.mark.django_db

BASE = "/p/study/certification"
INF = math.inf


def _question(key: str, rank: float) -> dict:
    """A question whose best admissible class has frequency rank 1, 2 or none (inf)."""
    if rank == 1:
        candidates = [cand(f"{key}a", answer="x", score=1.0, selected=True)]
    elif rank == 2:
        candidates = [
            cand(f"{key}a", answer="x", label="inadmissible", score=1.0, selected=True),
            cand(f"{key}b", answer="x", label="inadmissible", score=1.0),
            cand(f"{key}c", answer="y", score=1.0),
        ]
    else:
        candidates = [cand(f"{key}a", answer="x", label="inadmissible", score=1.0, selected=True)]
    return rec(key, candidates, group_key=f"g{int(key[1:]) // 5}")


def _partition(prefix: str, ranks: list[float]) -> list[dict]:
    return [_question(f"{prefix}{i}", r) for i, r in enumerate(ranks)]


CALIBRATION = [1.0] * 30 + [2.0] * 6 + [INF] * 4
TEST = [1.0] * 15 + [2.0] * 3 + [INF] * 2


@pytest.fixture
def run(project):
    calibration_project(
        project,
        {"calibration": _partition("c", CALIBRATION), "test": _partition("t", TEST)},
    )
    spec = make_spec(project, method="conformal_set", selector="mode", alpha="0.1")
    return calibration_run_execute(run_id=calibration_run_request(spec=spec, trigger="manual").pk)


def test_result_marks_infinite_points_of_the_curve_and_counts_unsolvable(run):
    conformal = run.result["conformal"]
    # k = ceil(41 * 0.9) = 37 > 36 finite scores: M* is infinite at the spec's alpha
    assert conformal["threshold"]["value"] == "inf"
    infinite = [p["alpha"] for p in conformal["curve"] if p["infinite"]]
    assert infinite == ["0.01", "0.02", "0.05", "0.1"]
    assert conformal["curve_infinite"] == {"alphas": infinite, "n": 20, "covered_unsolvable": 2}
    assert all(p["covered_unsolvable"] == 0 for p in conformal["curve"] if not p["infinite"])


def test_result_detects_ties_and_gives_the_exact_tied_split_law(run):
    dependence = run.result["dependence"]
    assert dependence["ties"] == {
        "n": 60,
        "distinct": 3,
        "tied_rows": 60,
        "largest_tie": 45,
        "tied": True,
    }
    assert "tied" in dependence["beta"]["note"]
    law = tied_split_coverage([1.0] * 45 + [2.0] * 9 + [INF] * 6, 40, "0.1")
    assert dependence["tied_split"]["sd"] == pytest.approx(law.sd, rel=1e-12)
    assert dependence["tied_split"]["mean"] == pytest.approx(law.mean, rel=1e-12)
    simulation = dependence["simulation"]
    assert simulation["reference"] == "exact tied split"
    assert simulation["predicted_excess"] is None
    assert simulation["predicted_reason"].startswith("not applicable to tied scores")


def _row(*cells):
    head, *rest = cells
    return f'<tr><th scope="row">{head}</th>' + "".join(f'<td class="num">{c}</td>' for c in rest)


def test_the_run_pages_charts_mark_infinite_m_star(run, login):
    body = login("adjudicator").get(f"{BASE}/runs/{run.pk}/").content.decode()
    coverage = re.search(r'id="chart-conformal-coverage">.*?</figure>', body, re.S).group(0)
    # M* = inf at alpha 0.01 .. 0.1: crossed out at coverage 1, with the unsolvable ones counted
    assert coverage.count('<path class="chart-cross chart-s1"') == 4
    assert "covered by convention (2 unsolvable counted covered)." in coverage
    assert _row("0.1", "1", "1", "0.9") in coverage  # coverage, M* = ∞, target
    assert _row("0.15", "0.9", "—", "0.85") in coverage
    assert _row("0.3", "0.75", "—", "0.7") in coverage
    assert "Reference line: spec alpha = 0.1</td>" in coverage
    sizes = re.search(r'id="chart-conformal-set-size">.*?</figure>', body, re.S).group(0)
    assert _row("0.1", "—") in sizes and _row("0.15", "1.15") in sizes and _row("0.5", "1") in sizes
    histogram = re.search(r'id="chart-rank-histogram">.*?</figure>', body, re.S).group(0)
    assert "<figcaption>Calibration rank scores (M* = ∞)</figcaption>" in histogram
    for rank, count in (("1", 30), ("2", 6), ("∞", 4)):
        assert _row(rank, count) + "</tr>" in histogram, rank
    assert 'text-anchor="middle">∞</text>' in histogram  # the x tick of the infinite rank


def test_the_coverage_chart_has_no_cross_without_an_infinite_m_star():
    finite = {"coverage": 0.9, "mean_set_size": 1.2, "covered_unsolvable": 0, "n": 20}
    section = {"alpha": "0.2", "curve": [{**finite, "alpha": "0.2", "threshold": 1}]}
    chart = conformal_coverage_chart(section)
    assert chart is not None
    assert [d.shape for d in chart.dots] == ["dot"]
    assert chart.table_head == ("alpha", "coverage", "target 1 − alpha")
    sizes = conformal_set_size_chart(section)
    assert sizes is not None and sizes.table_rows == (("0.2", "1.2"),)


def test_the_run_page_shows_the_ties_and_the_curve_caveat(run, login):
    body = login("adjudicator").get(f"{BASE}/runs/{run.pk}/").content.decode()
    assert 'id="ties-note"' in body
    assert "60 of 60 questions share their score with another (3 distinct values" in body
    assert 'id="beta-tied-note"' in body and 'id="tied-split"' in body
    assert 'id="curve-infinite"' in body
    assert "M* = ∞ at alpha 0.01, 0.02, 0.05, 0.1 (the spec's alpha among them)" in body
    assert "all 20 questions of the test partition count as covered by convention, 2 of them" in (
        body
    )
    assert 'href="/certification/coverage-calculator/"' in body


def test_the_certify_command_prints_the_tie_note(run):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("certify", "--project", "study", "--run", str(run.pk), stdout=out)
    text = out.getvalue()
    assert "Coverage spread: tied scores (60 of 60 share a value, 3 distinct)" in text
    law = tied_split_coverage([1.0] * 45 + [2.0] * 9 + [INF] * 6, 40, "0.1")
    assert f"tie-aware (exact random-split law): mean {law.mean:.4g}, sd {law.sd:.4g}" in text
    assert "predicted excess: not applicable to tied scores" in text
