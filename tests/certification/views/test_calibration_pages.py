"""Calibration pages through the Django test client: roles, the editor, runs with charts."""

from __future__ import annotations

import copy
import re

import pytest

from certification.certificates import STATS_VERSION
from certification.models import CalibrationRun, CalibrationSpec, RunStatus
from certification.services import calibration_run_execute, calibration_run_request
from labeling.services import project_create
from tests.conftest import module_data
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_project, make_spec
from tests.factories import calibration_record as rec

pytestmark = pytest.mark.django_db

BASE = "/p/study/certification"
FORM = {
    "name": "main",
    "description": "all questions of the workload",
    "method": "both",
    "loss": "answer_inadmissible",
    "denominator": "accepted_answers",
    "alpha": "0.1",
    "delta": "0.05",
    "thresholds": "0.5, 0.9",
    "acceptance": ">=",
    "score_field": "acceptance_score",
    "selector": "mode",
    "utility": "answer_rate",
    "multiplicity": "bonferroni",
    "canonicaliser": "exact",
    "tie_rule": "canonical_ascending",
    "answer_field": "canonical_form",
    "stopping_delta": "",
    "partition": "calibration",
    "unresolved_as": "error",
    "evidence_unavailable_as": "error",
    "abstained_as": "error",
    "pending_as": "exclude",
    "report_confidence": "0.95",
    "seed": "0",
}


@pytest.fixture(scope="module")
def _data_once(django_db_setup, django_db_blocker, tmp_path_factory):
    """:func:`data`, written once per module (``module_data`` in tests/conftest.py)."""
    with module_data(django_db_blocker, tmp_path_factory.mktemp("releases")) as write:
        yield write(lambda: _data(project_create(slug="study", name="Study")))


@pytest.fixture
def project(_data_once, db):
    """The module's project, holding :func:`data`; each test runs in a savepoint rolled back
    after it, on a copy of the object."""
    return copy.deepcopy(_data_once)


@pytest.fixture
def data(project):
    return project


def _data(project):
    calibration = [
        rec(f"c{i}", [cand("a", answer="x", score=1.0, selected=True)]) for i in range(50)
    ]
    calibration.append(rec("pending", [cand("a", answer="x", score=1.0, label=None)]))
    test = [
        rec(f"t{i}", [cand("a", answer="x", score=1.0, selected=True)], slices={"domain": "law"})
        for i in range(10)
    ]
    return calibration_project(project, {"calibration": calibration, "test": test})


@pytest.fixture
def spec(data):
    return make_spec(data, method="both", selector="mode", thresholds=[0.5, 0.9])


@pytest.fixture
def done_run(spec):
    run = calibration_run_request(spec=spec, trigger="manual")
    return calibration_run_execute(run_id=run.pk)


def _pages(run):
    spec = run.spec
    return [
        f"{BASE}/",
        f"{BASE}/specs/new/",
        f"{BASE}/specs/{spec.pk}/",
        f"{BASE}/specs/{spec.pk}/revise/",
        f"{BASE}/runs/{run.pk}/",
    ]


# -- roles -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("role", "statuses"),
    [
        ("annotator", [404, 404, 404, 404, 404]),
        ("adjudicator", [200, 403, 200, 403, 200]),
        ("manager", [200, 200, 200, 200, 200]),
        ("staff", [200, 200, 200, 200, 200]),
        ("nonmember", [404, 404, 404, 404, 404]),
    ],
)
def test_who_sees_which_page(done_run, login, role, statuses):
    client = login(role)
    assert [client.get(url).status_code for url in _pages(done_run)] == statuses


def test_anonymous_users_are_sent_to_the_login(done_run, client):
    for url in _pages(done_run):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]


@pytest.mark.parametrize("role", ["annotator", "adjudicator"])
def test_only_managers_post(spec, login, role):
    client = login(role)
    expected = 404 if role == "annotator" else 403
    assert client.post(f"{BASE}/specs/new/", FORM).status_code == expected
    assert client.post(f"{BASE}/specs/{spec.pk}/run/").status_code == expected
    assert client.post(f"{BASE}/specs/{spec.pk}/revise/", FORM).status_code == expected
    assert CalibrationSpec.objects.count() == 1 and not CalibrationRun.objects.exists()


def test_another_projects_spec_is_not_found(data, login):
    other = project_create(slug="other", name="Other")
    foreign = make_spec(other, name="theirs")
    client = login("manager")
    assert client.get(f"{BASE}/specs/{foreign.pk}/").status_code == 404
    assert client.post(f"{BASE}/specs/{foreign.pk}/run/").status_code == 404


def test_the_dashboard_links_to_calibration_for_managers_only(spec, login):
    assert f"{BASE}/" in login("manager").get("/p/study/").content.decode()


def test_the_dashboard_hides_calibration_from_annotators(spec, login):
    assert "/certification/" not in login("annotator").get("/p/study/").content.decode()


# -- the editor --------------------------------------------------------------------------------
def test_a_manager_writes_a_spec(data, login):
    response = login("manager").post(f"{BASE}/specs/new/", FORM)
    spec = CalibrationSpec.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"{BASE}/specs/{spec.pk}/"
    assert spec.thresholds == [0.5, 0.9] and str(spec.alpha.normalize()) == "0.1"
    assert spec.description == "all questions of the workload"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"alpha": "2"}, "alpha"),
        ({"thresholds": "0.5, x"}, "thresholds"),
        ({"thresholds": ""}, "thresholds"),
        ({"score_field": ""}, "score_field"),
    ],
)
def test_an_invalid_spec_is_shown_with_its_field(data, login, change, field):
    response = login("manager").post(f"{BASE}/specs/new/", {**FORM, **change})
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert field in errors
    assert not CalibrationSpec.objects.exists()


def test_revising_saves_a_new_version(done_run, login):
    spec = done_run.spec
    client = login("manager")
    page = client.get(f"{BASE}/specs/{spec.pk}/revise/")
    assert page.context["form"].initial["thresholds"] == "0.5, 0.9"
    response = client.post(f"{BASE}/specs/{spec.pk}/revise/", {**FORM, "alpha": "0.2"})
    new = CalibrationSpec.objects.get(previous=spec)
    assert response["Location"] == f"{BASE}/specs/{new.pk}/"
    assert new.version == 2 and new.name == spec.name  # the name field is fixed
    # the old version says it is superseded and offers no second revision
    body = client.get(f"{BASE}/specs/{spec.pk}/").content.decode()
    assert 'id="superseded"' in body and 'id="revise-spec"' not in body


# -- runs --------------------------------------------------------------------------------------
def test_run_now_redirects_to_the_run(spec, login, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = login("manager").post(f"{BASE}/specs/{spec.pk}/run/")
    run = CalibrationRun.objects.get()
    assert response["Location"] == f"{BASE}/runs/{run.pk}/"
    assert run.status == RunStatus.DONE


def test_the_run_page_shows_certificate_charts_ledger_and_report(done_run, login):
    response = login("adjudicator").get(f"{BASE}/runs/{done_run.pk}/")
    body = response.content.decode()
    for anchor in (
        'id="selective-risk"',
        'id="threshold-table"',
        'id="conformal"',
        'id="heldout-table"',
        'id="ledger-table"',
        'id="rccs"',
        'id="dependence"',
    ):
        assert anchor in body, anchor
    # four server-side SVG charts, inline
    for chart in ("selective-risk", "conformal-coverage", "conformal-set-size", "rank-histogram"):
        assert f'id="chart-{chart}"><figcaption>' in body.replace("\n", ""), chart
    assert body.count('data-field="') == 12
    assert 'data-metric="emitted_answer_risk"' in body
    assert "Slice: domain" in body
    # the pending candidate is reported and the certificate's scope said
    assert 'id="pending-note"' in body and "covers only the resolved items" in body
    # a finished run does not ask for its JSON
    assert "data-poll-url" not in body and "work_progress.js" not in body


def test_a_pending_run_page_updates_itself_from_the_runs_json(spec, login):
    run = calibration_run_request(spec=spec, trigger="manual")
    client = login("adjudicator")
    body = client.get(f"{BASE}/runs/{run.pk}/").content.decode()
    url = f"/api/projects/study/calibration/runs/{run.pk}/"
    assert (
        f'data-work-id="{run.pk}" data-poll-url="{url}" data-poll-path="run" data-poll-ms="3000"'
    ) in body
    assert '<script src="/static/labeling/work_progress.js" defer>' in body
    assert 'data-work-field="status">pending<' in body and 'id="ledger"' not in body
    # the JSON the script reads answers the page's session, with what it shows
    shown = client.get(url).json()["run"]
    assert (shown["id"], shown["status"], shown["worker_lost"]) == (run.pk, "pending", False)


def test_a_failed_run_shows_its_error_and_no_certificate(spec, login):
    run = calibration_run_request(spec=spec, trigger="manual")
    CalibrationRun.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, error="boom")
    body = login("manager").get(f"{BASE}/runs/{run.pk}/").content.decode()
    assert 'id="run-error"' in body and "boom" in body
    assert 'id="selective-risk"' not in body


def test_the_list_shows_specs_and_runs(done_run, login):
    body = login("adjudicator").get(f"{BASE}/").content.decode()
    assert 'id="spec-list"' in body and f"run {done_run.pk}" in body
    assert 'id="new-spec"' not in body  # adjudicators read only
    assert 'id="new-spec"' in login("manager").get(f"{BASE}/").content.decode()


def test_the_run_pages_charts_pass_the_content_security_policy(done_run, login):
    from tests.test_csp import inline_violations

    response = login("adjudicator").get(f"{BASE}/runs/{done_run.pk}/")
    body = response.content.decode()
    assert body.count("<svg") == 4
    assert "style-src 'self'" in response["Content-Security-Policy"]
    # shapes are styled by classes from the stylesheet, never inline
    assert inline_violations(body) == []
    assert '<circle class="chart-ring chart-s2"' in body and '<g class="chart-rule">' in body


# -- the run's charts, drawn from its stored result ---------------------------------------------
def _chart(body, chart_id):
    """The ``<figure>`` of one chart of a page."""
    match = re.search(
        rf'<figure class="chart [^"]*" id="chart-{chart_id}">.*?</figure>', body, re.S
    )
    assert match, chart_id
    return match.group(0)


def _row(*cells):
    """A data-table row as the chart template writes it."""
    head, *rest = cells
    return f'<tr><th scope="row">{head}</th>' + "".join(f'<td class="num">{c}</td>' for c in rest)


def test_the_selective_risk_chart_draws_risk_bound_alpha_and_certified_thresholds(done_run, login):
    section = done_run.result["selective_risk"]
    bound = f"{section['rows'][0]['upper_bound']:.4g}"
    assert bound == "0.07112"
    body = login("adjudicator").get(f"{BASE}/runs/{done_run.pk}/").content.decode()
    chart = _chart(body, "selective-risk")
    assert "<figcaption>Selective risk against the threshold: certified</figcaption>" in chart
    head = (
        '<th scope="col">threshold (acceptance_score &gt;= t)</th>'
        '<th scope="col">empirical risk k/denominator</th>'
        '<th scope="col">upper bound (0.975 one-sided)</th>'
        '<th scope="col">certified (upper bound)</th>'
    )
    assert head in chart
    # both thresholds: risk 0 (no error in 50), bound 0.07112, certified (ringed)
    assert _row("0.5", "0", bound, bound) in chart and _row("0.9", "0", bound, bound) in chart
    assert chart.count('<circle class="chart-ring chart-s2"') == 2
    # the alpha line and the chosen operating point, drawn and listed under the table
    assert 'text-anchor="end">alpha = 0.1</text>' in chart
    assert '<td colspan="4">Reference line: alpha = 0.1</td>' in chart
    assert "Reference line: operating point t = 0.5</td>" in chart


def test_an_uncertified_threshold_is_not_ringed_and_no_operating_point_is_drawn(data, login):
    # t = 0.5 needs 59 answers without error at alpha 0.05 (50 here)
    spec = make_spec(
        data, name="uncertified", method="selective_risk", thresholds=[0.5], alpha="0.05"
    )
    run = calibration_run_execute(run_id=calibration_run_request(spec=spec, trigger="manual").pk)
    bound = f"{run.result['selective_risk']['rows'][0]['upper_bound']:.4g}"
    chart = _chart(
        login("adjudicator").get(f"{BASE}/runs/{run.pk}/").content.decode(), "selective-risk"
    )
    assert _row("0.5", "0", bound, "—") in chart
    assert (
        "<figcaption>Selective risk against the threshold: no certified operating point<" in chart
    )
    assert "chart-ring" not in chart and "operating point t =" not in chart
    assert "Reference line: alpha = 0.05</td>" in chart


def test_the_conformal_charts_mark_infinite_m_star_and_leave_its_set_size_out(done_run, login):
    # at alpha 0.01, M* is infinite (k = 51 > 50 scores); from 0.02 on, M* = 1
    curve = done_run.result["conformal"]["curve"]
    assert [p["threshold"] for p in curve[:2]] == ["inf", 1.0]
    body = login("adjudicator").get(f"{BASE}/runs/{done_run.pk}/").content.decode()
    coverage = _chart(body, "conformal-coverage")
    assert _row("0.01", "1", "1", "0.99") in coverage  # coverage, M* = ∞, target 1 - alpha
    assert _row("0.02", "1", "—", "0.98") in coverage
    assert _row("0.5", "1", "—", "0.5") in coverage
    assert coverage.count('<path class="chart-cross chart-s1"') == 1
    assert "<title>0.01 · M* = ∞ (covered by convention): 1</title>" in coverage
    assert 'class="chart-line chart-dashed chart-s2"' in coverage  # the target
    assert "Reference line: spec alpha = 0.1</td>" in coverage
    sizes = _chart(body, "conformal-set-size")
    assert _row("0.01", "—") in sizes and _row("0.02", "1") in sizes
    # the infinite point is a gap: one line over the nine finite points
    (points,) = re.findall(r'<polyline class="chart-line chart-s0" points="([^"]*)"', sizes)
    assert len(points.split()) == 9
    histogram = _chart(body, "rank-histogram")
    assert "<figcaption>Calibration rank scores (M* = 1)</figcaption>" in histogram
    assert _row("1", "50") + "</tr>" in histogram


def test_a_run_not_done_draws_no_chart(spec, login):
    run = calibration_run_request(spec=spec, trigger="manual")
    body = login("manager").get(f"{BASE}/runs/{run.pk}/").content.decode()
    assert "<svg" not in body and 'class="chart ' not in body


def _text(response):
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode())).strip()


def test_the_run_page_shows_each_method_and_the_statistics_version(data, login):
    # given a both spec whose t = 0.5 needs 59 answers without error at alpha 0.05 (50 here)
    # while M* = 1 holds (k = 49 of 50 scores, all 1)
    spec = make_spec(
        data, name="half", method="both", selector="mode", thresholds=[0.5], alpha="0.05"
    )
    run = calibration_run_execute(run_id=calibration_run_request(spec=spec, trigger="manual").pk)
    page = login("adjudicator").get(f"{BASE}/runs/{run.pk}/")
    body = page.content.decode()
    assert '<span data-method="selective_risk" data-method-certified="no">' in body
    assert '<span data-method="conformal_set" data-method-certified="yes">' in body
    text = _text(page)
    assert 'Conformal sets: certifies; apply it alone with "method": "conformal_set"' in text
    assert (
        "Selective risk (Learn then Test): certifies nothing (no certified operating point" in text
    )
    assert f"Statistics version {STATS_VERSION} (this server's)" in text
    # a run of another statistics version says so
    CalibrationRun.objects.filter(pk=run.pk).update(stats_version=STATS_VERSION - 1)
    text = _text(login("adjudicator").get(f"{BASE}/runs/{run.pk}/"))
    assert f"this server computes version {STATS_VERSION}" in text


def test_run_now_after_the_automatic_first_run_says_what_started_it(
    data, login, django_capture_on_commit_callbacks
):
    # given a spec saved by a manager: its first run starts by itself (the derived refresh)
    client = login("manager")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"{BASE}/specs/new/", {**FORM, "name": "auto"})
    spec = CalibrationSpec.objects.get(name="auto")
    [first] = CalibrationRun.objects.filter(spec=spec)
    assert first.trigger == "labels_changed"
    # when the manager clicks Run now on the same inputs
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"{BASE}/specs/{spec.pk}/run/", follow=True)
    # then no run is added, the page says so and labels the run's trigger truly
    assert CalibrationRun.objects.filter(spec=spec).count() == 1
    text = _text(response)
    assert f"No new run: the inputs are unchanged since run {first.pk}" in text
    assert "Trigger automatic: the spec was saved (its first run)" in text
    assert "resolved labels changed" not in text
    listing = _text(client.get(f"{BASE}/specs/{spec.pk}/"))
    assert "automatic: the spec was saved (its first run)" in listing
