"""The coverage calculator through the API and its page (Django test client)."""

from __future__ import annotations

import pytest
from scipy.stats import beta, betabinom

pytestmark = pytest.mark.django_db

URL = "/api/coverage-calculator/"
PAGE = "/certification/coverage-calculator/"


def test_api_reproduces_the_seed_values(api):
    # when: n = 12,288, alpha 0.1, an equal test half, groups of 64 with rho 0.0166
    response = api("annotator").get(
        URL, {"n": 12288, "alpha": "0.1", "n_test": 12288, "group_size": 64, "icc": "0.0166"}
    )
    # then
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["l"], body["k"]) == (1228, 11061)
    assert body["inputs"]["alpha"] == "0.1" and body["inputs"]["alpha_exact"] == "1/10"
    assert body["beta"]["sd"] == pytest.approx(beta(11061, 1228).std(), rel=1e-12)
    assert round(body["beta"]["sd"], 4) == 0.0027
    realised = betabinom(12288, 11061, 1228).std() / 12288
    assert body["realised"]["sd"] == pytest.approx(realised, rel=1e-12)
    assert round(body["realised"]["sd"], 4) == 0.0038
    deff = 1 + 63 * 0.0166
    assert body["grouping"]["design_effect"] == pytest.approx(deff)
    assert body["grouping"]["grouped_realised_sd"] == pytest.approx(realised * deff**0.5)
    assert body["grouping"]["effective_n_calibration"] == pytest.approx(12288 / deff)


def test_api_reports_an_infinite_threshold_without_error(api):
    body = api("manager").get(URL, {"n": 5, "alpha": "0.1"}).json()
    assert body["l"] == 0 and body["beta"]["sd"] is None
    assert "infinite" in body["beta"]["reason"]
    assert body["realised"] is None and body["grouping"] is None


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"n": 0, "alpha": "0.1"}, "n"),
        ({"n": 10, "alpha": "0"}, "alpha"),
        ({"n": 10, "alpha": "1"}, "alpha"),
        ({"n": 10, "alpha": "-0.1"}, "alpha"),
        ({"n": 10, "alpha": "NaN"}, "alpha"),
        ({"n": 10, "alpha": "inf"}, "alpha"),
        ({"n": 10, "alpha": "1e-400"}, "alpha"),
        ({"n": 10**13, "alpha": "0.1"}, "n"),
        ({"n": "1" * 40, "alpha": "0.1"}, "n"),
        ({"n": 10, "alpha": "0.1", "n_test": 0}, "n_test"),
        ({"n": 10, "alpha": "0.1", "icc": "NaN", "group_size": 3}, "icc"),
        ({"n": 10, "alpha": "0.1", "icc": "2", "group_size": 3}, "icc"),
        ({"n": 10, "alpha": "0.1", "group_size": 3}, "icc"),
        ({"n": 10, "alpha": "0.1", "icc": "0.2"}, "group_size"),
        ({"n": 10, "alpha": "0.1", "icc": "-0.6", "group_size": 3}, "icc"),
        ({"alpha": "0.1"}, "n"),
        ({"n": 10}, "alpha"),
        ({"n": 10, "alpha": "0.1", "size": 3}, "size"),
        # a group larger than the calibration set describes no design
        ({"n": 10, "alpha": "0.1", "group_size": 1_000_000_000, "icc": "1"}, "group_size"),
        ({"n": 10, "alpha": "0.1", "group_size": 11, "icc": "0.1"}, "group_size"),
    ],
)
def test_api_refuses_bad_input_with_a_400_naming_the_field(api, query, field):
    response = api("adjudicator").get(URL, query)
    assert response.status_code == 400
    assert field in {error.get("field") for error in response.json()["errors"]}, response.json()


def test_api_says_what_an_alpha_must_look_like(api):
    response = api("adjudicator").get(URL, {"n": 10, "alpha": "1e-3"})
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {
            "field": "alpha",
            "reason": "must be a plain decimal number such as 0.05 (no exponent, NaN or inf)",
        }
    ]


def test_api_needs_a_login(api):
    assert api("anonymous").get(URL, {"n": 10, "alpha": "0.1"}).status_code == 401


def test_page_shows_the_figures(login):
    response = login("annotator").get(PAGE, {"n": 12288, "alpha": "0.1", "n_test": 12288})
    assert response.status_code == 200
    text = response.content.decode()
    assert "Beta(11061, 1228)" in text
    assert 'id="row-beta-sd"><td>SD, calibration term</td><td class="num">0.002705<' in text
    assert 'id="row-realised-sd"><td>SD with the test term</td><td class="num">0.003826<' in text


def test_page_gives_the_api_request_of_the_figures_shown(login):
    response = login("manager").get(PAGE, {"n": 10, "alpha": "0.2", "n_test": 5})
    text = response.content.decode()
    assert "GET /api/coverage-calculator/?n=10&amp;alpha=0.2&amp;n_test=5<" in text


def test_page_without_input_shows_the_empty_form(login):
    response = login("manager").get(PAGE)
    assert response.status_code == 200
    assert 'id="calculator-form"' in response.content.decode()
    assert 'id="calculator-result"' not in response.content.decode()


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"n": 0, "alpha": "0.1"}, "n"),
        ({"n": 10, "alpha": "0"}, "alpha"),
        ({"n": 10, "alpha": "NaN"}, "alpha"),
        ({"n": "huge", "alpha": "0.1"}, "n"),
        ({"n": 10**13, "alpha": "0.1"}, "n"),
        ({"n": 10, "alpha": "0.1", "icc": "nan", "group_size": 3}, "icc"),
        ({"n": 10, "alpha": "0.1", "group_size": 3}, "icc"),
        ({"n": 10, "alpha": "0.1", "icc": "-0.9", "group_size": 3}, "icc"),
        ({"n": 10, "alpha": "0.1", "group_size": 11, "icc": "0.1"}, "group_size"),
        ({"n": 10, "alpha": "1e-3"}, "alpha"),  # as the API: a plain decimal
    ],
)
def test_page_refuses_bad_input_with_the_field_error(login, query, field):
    response = login("manager").get(PAGE, query)
    assert response.status_code == 400
    assert field in response.context["form"].errors


def test_page_needs_a_login(client):
    response = client.get(PAGE)
    assert response.status_code == 302 and "login" in response["Location"]
