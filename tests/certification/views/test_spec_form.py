"""The calibration spec form through the Django test client: labels, defaults and help, every
field's refusal next to it, junk in every field, and a spec declared then run from the pages."""

from __future__ import annotations

import re

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certification.forms import CalibrationSpecForm
from certification.models import CalibrationRun, CalibrationSpec, RunStatus, RunTrigger
from certification.services.calibration_specs import SPEC_DEFAULTS
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_project, make_spec
from tests.factories import calibration_record as rec

pytestmark = pytest.mark.django_db

BASE = "/p/study/certification"
NEW = f"{BASE}/specs/new/"
FORM = {
    "name": "main",
    "description": "every question of the workload",
    "method": "both",
    "loss": "answer_inadmissible",
    "loss_field": "",
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


def _field_block(html: str, name: str) -> str:
    """The page's paragraph of one field: its label, input, help text and errors."""
    found = re.search(rf'<p id="field-{name}">(.*?)</p>\s*(?=<p id="field-|<p><button)', html, re.S)
    assert found, name
    return found.group(1)


def test_the_list_page_links_managers_to_the_form(project, login):
    body = login("manager").get(f"{BASE}/").content.decode()
    assert f'id="new-spec" href="{NEW}"' in body


def test_the_form_shows_labels_defaults_and_a_help_text_per_field(project, login):
    # when
    response = login("manager").get(NEW)
    html = response.content.decode()
    # then every field of the contract is on the page, each with a help text
    assert response.status_code == 200
    assert set(FORM) == set(CalibrationSpecForm.base_fields)
    for name in FORM:
        assert '<span class="helptext">' in _field_block(html, name), name
    # selects carry the model's labels; the defaults are the service's
    assert '<option value="bonferroni" selected>Bonferroni (delta / M)</option>' in html
    assert '<option value="exclude" selected>excluded (reported with its count)</option>' in (
        _field_block(html, "pending_as")
    )
    assert '<option value="error" selected>as an error</option>' in (
        _field_block(html, "unresolved_as")
    )
    assert 'name="report_confidence" value="0.95"' in html
    assert 'name="seed" value="0"' in html
    # the required choices without a default start unchosen
    for name in ("method", "selector"):
        assert '<option value="" selected>— choose —</option>' in _field_block(html, name)


def _made(response):
    return response.status_code == 302 and CalibrationSpec.objects.exists()


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"name": "  "}, "name", "required"),
        ({"description": "x" * 10_001}, "description", "description: must be text of at most"),
        ({"method": ""}, "method", "required"),
        ({"method": "sideways"}, "method", "Select a valid choice"),
        ({"loss": "zero_one"}, "loss", "Select a valid choice"),
        ({"loss": "unsupported_claim_share"}, "loss", "loss: a bounded loss is certified by"),
        (
            {"method": "selective_risk", "loss": "candidate_field", "loss_field": "bogus"},
            "loss_field",
            "loss.field: the candidate field must be one of",
        ),
        ({"denominator": "ratio"}, "denominator", "Select a valid choice"),
        ({"alpha": "2"}, "alpha", "alpha: must lie strictly between 0 and 1"),
        ({"alpha": "ten percent"}, "alpha", "alpha: must be a number strictly between 0 and 1"),
        ({"delta": "0"}, "delta", "delta: must lie strictly between 0 and 1"),
        ({"delta": "0.123456789"}, "delta", "delta: at most 8 decimal places"),
        ({"thresholds": "0.5, x"}, "thresholds", "thresholds[1]: must be a number"),
        ({"thresholds": "0.5 0.5"}, "thresholds", "thresholds[1]: 0.5 is listed twice"),
        ({"thresholds": "inf"}, "thresholds", "thresholds[0]: must be finite"),
        ({"thresholds": ""}, "thresholds", "selective risk needs a non-empty threshold family"),
        ({"acceptance": "=>"}, "acceptance", "Select a valid choice"),
        ({"score_field": ""}, "score_field", "score_field: must be one of"),
        ({"score_field": "evaluator:ghost@1"}, "score_field", "Select a valid choice"),
        ({"selector": "each_candidate"}, "selector", "selector: a conformal prediction set is"),
        ({"selector": ""}, "selector", "required"),
        ({"utility": "most"}, "utility", "Select a valid choice"),
        ({"multiplicity": "holm"}, "multiplicity", "Select a valid choice"),
        ({"canonicaliser": "lower"}, "canonicaliser", "Select a valid choice"),
        ({"tie_rule": "random"}, "tie_rule", "Select a valid choice"),
        ({"answer_field": "json"}, "answer_field", "Select a valid choice"),
        ({"stopping_delta": "1.5"}, "stopping_delta", "stopping_delta: must lie strictly"),
        ({"partition": "test"}, "partition", "Select a valid choice"),
        ({"unresolved_as": "ignore"}, "unresolved_as", "Select a valid choice"),
        ({"evidence_unavailable_as": ""}, "evidence_unavailable_as", "required"),
        ({"abstained_as": "skip"}, "abstained_as", "Select a valid choice"),
        ({"pending_as": "error, exclude"}, "pending_as", "Select a valid choice"),
        ({"report_confidence": "95"}, "report_confidence", "report_confidence: must lie"),
        ({"seed": "-1"}, "seed", "greater than or equal to 0"),
        ({"seed": str(2**63)}, "seed", "seed: must lie in [0, 2**63)"),
        ({"seed": "1.5"}, "seed", "Enter a whole number"),
    ],
)
def test_each_invalid_field_is_refused_next_to_it(project, login, change, field, says):
    # when
    response = login("manager").post(NEW, {**FORM, **change})
    # then the page answers 400 with the reason beside the field, and writes nothing
    assert response.status_code == 400
    assert list(response.context["form"].errors) == [field]
    block = _field_block(response.content.decode(), field)
    assert 'class="errorlist' in block and says in block.replace("&#x27;", "'")
    assert not CalibrationSpec.objects.exists()


def test_a_taken_name_is_refused_on_the_name(project, login):
    make_spec(project, name="main")
    response = login("manager").post(NEW, FORM)
    assert response.status_code == 400
    assert list(response.context["form"].errors) == ["name"]
    assert "a spec named &#x27;main&#x27; exists: revise it instead" in _field_block(
        response.content.decode(), "name"
    )


def test_a_repeated_field_is_refused(project, login):
    response = login("manager").post(NEW, {**FORM, "alpha": ["0.1", "0.2"]})
    assert response.status_code == 400
    assert "2 values given" in _field_block(response.content.decode(), "alpha")


JUNK = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "\x00", "NaN", "-inf", "1e999999", "1e-999999", "0x1p-3", "½"]),
    st.integers().map(str),
    st.lists(st.text(max_size=5), min_size=2, max_size=3),
)


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(junk=st.dictionaries(st.sampled_from(sorted(FORM)), JUNK, min_size=1))
def test_junk_in_any_field_is_never_a_server_error(project, login, junk):
    client = login("manager")
    # when (each example rolled back, so a spec written by chance frees its name)
    with transaction.atomic():
        response = client.post(NEW, {**FORM, **junk})
        transaction.set_rollback(True)
    # then the spec is written (302) or the form names what it refused (400)
    assert response.status_code in (302, 400), (junk, response.status_code)
    if response.status_code == 400:
        errors = response.context["form"].errors
        assert errors and set(errors) <= set(FORM), errors


def test_a_manager_declares_a_spec_and_starts_its_run(
    project, login, django_capture_on_commit_callbacks
):
    # given a project with resolved calibration and test questions
    calibration_project(
        project,
        {
            "calibration": [
                rec(f"c{i}", [cand("a", answer="x", score=1.0, selected=True)]) for i in range(40)
            ],
            "test": [
                rec(f"t{i}", [cand("a", answer="x", score=1.0, selected=True)]) for i in range(5)
            ],
        },
    )
    client = login("manager")
    # when the manager saves the form (its automatic first run is not sent here)
    saved = client.post(NEW, FORM, follow=True)
    # then the spec's page shows the contract and the Run now button
    spec = CalibrationSpec.objects.get()
    assert saved.redirect_chain == [(f"{BASE}/specs/{spec.pk}/", 302)]
    page = saved.content.decode()
    assert f'action="{BASE}/specs/{spec.pk}/run/" id="start-run-form"' in page
    assert (spec.method, spec.selector, spec.thresholds) == ("both", "mode", [0.5, 0.9])
    assert spec.created_by.username and spec.report_confidence == SPEC_DEFAULTS["report_confidence"]
    # when the manager clicks Run now
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(f"{BASE}/specs/{spec.pk}/run/")
    # then the run was computed and its page shows it done
    run = CalibrationRun.objects.get(spec=spec)
    assert (run.status, run.trigger) == (RunStatus.DONE, RunTrigger.MANUAL)
    assert started["Location"] == f"{BASE}/runs/{run.pk}/"
    body = client.get(started["Location"]).content.decode()
    assert f"Run {run.pk}: pending." in body  # the message of the start
    assert 'data-status="done"' in body and 'id="run-outcome"' in body
