"""Bounded losses end to end: the spec's loss object, its hash, validation, runs, API and pages.

The expected figures are computed here from the imported records themselves (each answer's
share of claims not labelled ``supported``; each candidate field's value) and the
Hoeffding–Bentkus formula written out in tests/certification/stats/test_bounded.py.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import random
import re

import pytest
from django.core.management import call_command

from certification.contract import SPEC_FIELDS, decimal_text
from certification.exceptions import InvalidSpec
from certification.models import CalibrationSpec, RunStatus
from certification.services import (
    calibration_run_execute,
    calibration_run_rebuild,
    calibration_run_request,
    calibration_spec_update,
)
from certification.stats.bounded import hoeffding_bentkus_upper_bounds
from tests.certification.stats.test_bounded import reference_p
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_project, make_spec
from tests.factories import calibration_record as rec

pytestmark = pytest.mark.django_db

SHARE = {"kind": "bounded", "source": "unsupported_claim_share"}
THRESHOLDS = [5.0, 4.0, 3.0, 2.0, 1.0]


def run_of(spec):
    """Request and compute a run of ``spec`` in this process."""
    run = calibration_run_request(spec=spec, trigger="manual")
    return calibration_run_execute(run_id=run.pk)


def claim_world(seed: int, size: int) -> list[tuple[float, str, tuple[str, ...]]]:
    """(score, answer label, claim labels) per question: higher scores, fewer bad claims."""
    rng = random.Random(seed)
    rows = []
    for _ in range(size):
        score = float(rng.randint(1, 5))
        bad = 0.02 * (6 - score) ** 2
        claims = tuple(
            rng.choice(("contradicted", "not_supported")) if rng.random() < bad else "supported"
            for _ in range(rng.randint(0, 4))
        )
        label = "inadmissible" if rng.random() < bad else "admissible"
        rows.append((score, label, claims))
    return rows


def share(label: str, claims: tuple[str, ...]) -> float:
    """The unsupported-claim share, written from its definition."""
    if not claims:
        return 0.0 if label == "admissible" else 1.0
    return sum(1 for c in claims if c != "supported") / len(claims)


def records(prefix: str, rows):
    return [
        rec(
            f"{prefix}{i}",
            [cand("a", answer="x", score=score, label=label, claims=claims, selected=True)],
        )
        for i, (score, label, claims) in enumerate(rows)
    ]


@pytest.fixture
def claims_project(project):
    calibration = claim_world(7, 400)
    test = claim_world(8, 120)
    calibration_project(
        project, {"calibration": records("c", calibration), "test": records("t", test)}
    )
    return project, calibration, test


# -- the contract ------------------------------------------------------------------------------
def test_a_binary_spec_keeps_its_hash(project):
    spec = make_spec(project, thresholds=[0.5, 0.9], description="d")
    content = {key: getattr(spec, key) for key in SPEC_FIELDS}
    for key in ("alpha", "delta", "report_confidence"):
        content[key] = decimal_text(content[key])
    # the contract as it was hashed before bounded losses: loss a plain string, no loss_field
    expected = hashlib.sha256(
        json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    ).hexdigest()
    assert content["loss"] == "answer_inadmissible" and spec.loss_field == ""
    assert spec.content_sha256 == expected


def test_a_bounded_spec_hashes_its_loss_object(project):
    share_spec = make_spec(project, name="share", loss=SHARE)
    field_spec = make_spec(
        project,
        name="field",
        loss={"kind": "bounded", "source": "candidate_field", "field": "metadata.loss"},
    )
    other = make_spec(
        project,
        name="other",
        loss={"kind": "bounded", "source": "candidate_field", "field": "confidence"},
    )
    assert (share_spec.loss, share_spec.loss_field) == ("unsupported_claim_share", "")
    assert (field_spec.loss, field_spec.loss_field) == ("candidate_field", "metadata.loss")
    hashes = {s.content_sha256 for s in (share_spec, field_spec, other)}
    assert len(hashes) == 3
    content = {key: getattr(field_spec, key) for key in SPEC_FIELDS}
    for key in ("alpha", "delta", "report_confidence"):
        content[key] = decimal_text(content[key])
    content["loss"] = {"kind": "bounded", "source": "candidate_field", "field": "metadata.loss"}
    expected = hashlib.sha256(
        json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    ).hexdigest()
    assert field_spec.content_sha256 == expected


@pytest.mark.parametrize(
    ("loss", "fields", "field", "message"),
    [
        ("bounded", {}, "loss", "must be one of answer_inadmissible, any_error"),
        (["x"], {}, "loss", "must be one of"),
        ({"kind": "binary", "source": "unsupported_claim_share"}, {}, "loss.kind", "bounded"),
        ({"kind": "bounded", "source": "rouge"}, {}, "loss.source", "unsupported_claim_share"),
        ({"kind": "bounded"}, {}, "loss.source", "must be one of"),
        ({**SHARE, "scale": "2"}, {}, "loss.scale", "not a field of a bounded loss"),
        ({**SHARE, "field": "confidence"}, {}, "loss.field", "only for the candidate_field"),
        ({"kind": "bounded", "source": "candidate_field"}, {}, "loss.field", "candidate field"),
        (
            {"kind": "bounded", "source": "candidate_field", "field": "text"},
            {},
            "loss.field",
            "metadata.<key>",
        ),
        (
            {"kind": "bounded", "source": "candidate_field", "field": "metadata."},
            {},
            "loss.field",
            "metadata.<key>",
        ),
        (SHARE, {"method": "both", "selector": "mode"}, "loss", "selective risk only"),
        (SHARE, {"method": "conformal_set", "selector": "mode"}, "loss", "selective risk only"),
    ],
)
def test_an_invalid_loss_is_named(project, loss, fields, field, message):
    with pytest.raises(InvalidSpec, match=message) as caught:
        make_spec(project, loss=loss, **fields)
    assert caught.value.field == field
    assert not CalibrationSpec.objects.exists()


def test_an_unused_spec_changes_between_binary_and_bounded(project):
    spec = make_spec(project, loss=SHARE)
    actor = spec.created_by
    spec = calibration_spec_update(spec=spec, actor=actor, loss="any_error")
    assert (spec.loss, spec.loss_field) == ("any_error", "")
    spec = calibration_spec_update(
        spec=spec,
        actor=actor,
        loss={"kind": "bounded", "source": "candidate_field", "field": "retrieval_score"},
    )
    assert (spec.loss, spec.loss_field) == ("candidate_field", "retrieval_score")
    # changing another field keeps the loss object
    spec = calibration_spec_update(spec=spec, actor=actor, alpha="0.2")
    assert (spec.loss, spec.loss_field) == ("candidate_field", "retrieval_score")


# -- runs --------------------------------------------------------------------------------------
def test_unsupported_claim_share_end_to_end(claims_project):
    project, calibration, test = claims_project
    spec = make_spec(project, loss=SHARE, thresholds=THRESHOLDS, alpha="0.15", delta="0.1")
    run = run_of(spec)
    assert run.status == RunStatus.DONE, run.error
    section = run.result["selective_risk"]
    assert section["p_value_test"] == "hoeffding_bentkus"
    assert section["loss"] == SHARE
    level = 0.1 / len(THRESHOLDS)
    certified = []
    for j, t in enumerate(THRESHOLDS):
        accepted = [share(label, claims) for score, label, claims in calibration if score >= t]
        m, total = len(accepted), math.fsum(accepted)
        row = section["rows"][j]
        assert (row["accepted"], row["denominator"]) == (m, m)
        assert row["loss_sum"] == pytest.approx(total, rel=1e-12)
        assert row["errors"] == sum(1 for x in accepted if x > 0)
        assert row["risk"] == pytest.approx(total / m, rel=1e-12)
        p = reference_p(total, m, 0.15)
        assert row["p_value"] == pytest.approx(p, rel=1e-9)
        assert row["certified"] == (p <= level)
        if p <= level:
            certified.append(j)
    # the world is built so that the top thresholds certify and the bottom ones do not
    assert certified and certified != list(range(len(THRESHOLDS)))
    assert section["certified_indices"] == certified
    # largest answer rate among the certified: the lowest certified threshold
    chosen = max(certified, key=lambda j: section["rows"][j]["accepted"])
    assert section["chosen_index"] == chosen
    counts = section["counts"]
    every = [share(label, claims) for _, label, claims in calibration]
    assert counts["loss_sum"] == pytest.approx(math.fsum(every), rel=1e-12)
    assert counts["errors"] == sum(1 for x in every if x > 0)

    # held out: the mean share of the emitted test answers, with a two-sided HB interval
    threshold = THRESHOLDS[chosen]
    emitted = [share(label, claims) for score, label, claims in test if score >= threshold]
    bounded = run.result["heldout"]["bounded_loss"]
    m, total = len(emitted), math.fsum(emitted)
    assert (bounded["emitted"], bounded["method"]) == (m, "hoeffding_bentkus")
    assert bounded["value"] == pytest.approx(total / m, rel=1e-12)
    upper, complement = hoeffding_bentkus_upper_bounds([total, m - total], [m, m], confidence=0.975)
    assert bounded["upper"] == pytest.approx(upper) and bounded["lower"] == pytest.approx(
        1 - complement
    )
    assert reference_p(total, m, bounded["upper"]) == pytest.approx(0.025, rel=1e-6)
    assert bounded["lower"] <= bounded["value"] <= bounded["upper"]

    ledger = {row["field"]: row["value"] for row in run.result["ledger"]}
    assert ledger["loss"].startswith("bounded: the share of the emitted answer's assessed claims")
    assert "range [0, 1]" in ledger["loss"]
    assert "Hoeffding–Bentkus" in ledger["assumptions"]
    assert ledger["numerator"] == "the total loss of the accepted answers (per threshold)"
    assert calibration_run_rebuild(run=run)


def test_a_binary_spec_on_the_same_labels_keeps_the_exact_binomial_test(claims_project):
    project, calibration, _ = claims_project
    spec = make_spec(project, loss="any_error", thresholds=THRESHOLDS, alpha="0.1")
    section = run_of(spec).result["selective_risk"]
    assert "p_value_test" not in section and "loss_sum" not in section["rows"][0]
    from scipy.stats import binom

    for j, t in enumerate(THRESHOLDS):
        rows = [(label, claims) for score, label, claims in calibration if score >= t]
        k = sum(1 for label, claims in rows if label != "admissible" or set(claims) - {"supported"})
        assert (section["rows"][j]["accepted"], section["rows"][j]["errors"]) == (len(rows), k)
        assert section["rows"][j]["p_value"] == pytest.approx(binom.cdf(k, len(rows), 0.1))


def test_zero_loss_certifies_from_the_same_count_as_zero_errors(project):
    rows = [(1.0, "admissible", ("supported", "supported"))] * 44
    calibration_project(project, {"calibration": records("c", rows)})
    bounded = run_of(make_spec(project, name="b", loss=SHARE, thresholds=[1.0], alpha="0.1"))
    binary = run_of(make_spec(project, name="k", thresholds=[1.0], alpha="0.1", delta="0.05"))
    b_row = bounded.result["selective_risk"]["rows"][0]
    k_row = binary.result["selective_risk"]["rows"][0]
    # 0.9^44 = 0.0097 <= 0.05 (one threshold): both certify with the same p-value
    assert b_row["p_value"] == pytest.approx(k_row["p_value"], rel=1e-12)
    assert b_row["p_value"] == pytest.approx(0.9**44, rel=1e-12)
    assert b_row["certified"] and k_row["certified"]


def _field_project(project, values):
    rows = []
    for i, value in enumerate(values):
        candidate = cand("a", answer="x", score=1.0, selected=True)
        candidate["metadata"] = {} if value is None else {"loss": value}
        rows.append(rec(f"c{i}", [candidate]))
    calibration_project(project, {"calibration": rows})


def test_a_candidate_field_loss(project):
    values = [0.0, 0.25, 0.125, 0.0, 1.0, 0.5] * 20
    _field_project(project, values)
    spec = make_spec(
        project,
        loss={"kind": "bounded", "source": "candidate_field", "field": "metadata.loss"},
        thresholds=[1.0],
        alpha="0.5",
    )
    run = run_of(spec)
    assert run.status == RunStatus.DONE, run.error
    row = run.result["selective_risk"]["rows"][0]
    total = math.fsum(values)
    assert (row["accepted"], row["loss_sum"]) == (120, pytest.approx(total))
    assert row["p_value"] == pytest.approx(reference_p(total, 120, 0.5), rel=1e-9)
    ledger = {r["field"]: r["value"] for r in run.result["ledger"]}
    assert "the candidate field metadata.loss of the emitted answer" in ledger["loss"]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (1.5, r"loss field 'metadata.loss' = 1.5 is outside \[0, 1\]"),
        (-0.25, r"= -0.25 is outside \[0, 1\]"),
        ("0.5", r"must be a number in \[0, 1\], got '0.5'"),
        (True, r"must be a number in \[0, 1\], got True"),
        (None, r"loss field 'metadata.loss' is missing"),
    ],
)
def test_an_out_of_range_candidate_field_fails_the_run_naming_item_and_field(project, bad, message):
    _field_project(project, [0.1, 0.2, bad, 0.3])
    spec = make_spec(
        project,
        loss={"kind": "bounded", "source": "candidate_field", "field": "metadata.loss"},
        thresholds=[1.0],
    )
    run = run_of(spec)
    assert run.status == RunStatus.FAILED and not run.result
    from labeling.models import CandidateAnswer

    bad_candidate = CandidateAnswer.objects.get(question__external_id="c2")
    assert f"candidate {bad_candidate.pk} (item {bad_candidate.item.pk})" in run.error
    assert re.search(message, run.error), run.error


# -- API and pages -----------------------------------------------------------------------------
API = "/api/projects/study/calibration"
BODY = {
    "name": "share",
    "method": "selective_risk",
    "alpha": "0.1",
    "delta": "0.1",
    "thresholds": THRESHOLDS,
    "score_field": "acceptance_score",
    "selector": "is_selected",
    "loss": SHARE,
}


def test_the_api_takes_and_shows_a_bounded_loss(
    claims_project, api, django_capture_on_commit_callbacks
):
    client = api("manager")
    response = client.post(f"{API}/specs/", BODY, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["loss"] == SHARE
    spec = CalibrationSpec.objects.get()
    assert body["content_sha256"] == spec.content_sha256
    assert client.get(f"{API}/specs/{spec.pk}/").json()["loss"] == SHARE
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(f"{API}/specs/{spec.pk}/runs/")
    report = client.get(f"{API}/runs/{started.json()['id']}/").json()
    assert report["spec"]["loss"] == SHARE
    assert report["result"]["selective_risk"]["p_value_test"] == "hoeffding_bentkus"


@pytest.mark.parametrize(
    ("loss", "field"),
    [
        ({"kind": "bounded", "source": "nope"}, "loss.source"),
        ({"kind": "bounded", "source": "candidate_field", "field": "bogus"}, "loss.field"),
        ({"kind": "bounded", "source": "candidate_field", "field": 3}, "loss"),
        (7, "loss"),
        ("bounded", "loss"),
    ],
)
def test_the_api_names_the_loss_field_in_errors(project, api, loss, field):
    response = api("manager").post(f"{API}/specs/", {**BODY, "loss": loss}, format="json")
    assert response.status_code == 400
    body = response.json()
    named = body.get("field") or [e["field"] for e in body.get("errors", [])][0]
    assert named == field
    if field == "loss":
        assert "bounded" in json.dumps(body)
    assert not CalibrationSpec.objects.exists()


PAGES = "/p/study/certification"
FORM = {
    "name": "share",
    "description": "",
    "method": "selective_risk",
    "loss": "unsupported_claim_share",
    "loss_field": "",
    "denominator": "accepted_answers",
    "alpha": "0.1",
    "delta": "0.1",
    "thresholds": "5, 4, 3, 2, 1",
    "acceptance": ">=",
    "score_field": "acceptance_score",
    "selector": "is_selected",
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


def test_the_spec_form_and_pages_show_the_bounded_loss(claims_project, login):
    client = login("manager")
    response = client.post(f"{PAGES}/specs/new/", FORM)
    assert response.status_code == 302
    spec = CalibrationSpec.objects.get()
    assert (spec.loss, spec.loss_field) == ("unsupported_claim_share", "")
    page = client.get(f"{PAGES}/specs/{spec.pk}/").content.decode()
    assert "bounded in [0, 1]: unsupported_claim_share · Hoeffding–Bentkus test" in page
    revise = client.get(f"{PAGES}/specs/{spec.pk}/revise/").content.decode()
    assert '<option value="unsupported_claim_share" selected>' in revise
    run = run_of(spec)
    page = client.get(f"{PAGES}/runs/{run.pk}/").content.decode()
    assert "Hoeffding–Bentkus p-values and upper bounds" in page
    assert "Loss total" in page and 'id="heldout-bounded-loss"' in page


def test_a_binary_spec_page_names_the_exact_binomial_test(claims_project, login):
    client = login("manager")
    assert client.post(f"{PAGES}/specs/new/", {**FORM, "loss": "any_error"}).status_code == 302
    spec = CalibrationSpec.objects.get()
    page = client.get(f"{PAGES}/specs/{spec.pk}/").content.decode()
    assert "any_error (0/1) · exact binomial test" in page
    run = run_of(spec)
    page = client.get(f"{PAGES}/runs/{run.pk}/").content.decode()
    assert "0/1 loss: exact binomial p-values" in page and "Errors k" in page


@pytest.mark.parametrize(
    ("change", "text"),
    [
        ({"loss": "candidate_field", "loss_field": "bogus"}, "the candidate field must be one of"),
        ({"loss": "candidate_field", "loss_field": ""}, "the candidate field must be one of"),
        ({"loss": "answer_inadmissible", "loss_field": "confidence"}, "only a bounded loss"),
        ({"method": "both", "selector": "mode"}, "selective risk only"),
    ],
)
def test_the_spec_form_shows_loss_errors(claims_project, login, change, text):
    response = login("manager").post(f"{PAGES}/specs/new/", {**FORM, **change})
    assert response.status_code == 400
    assert text in response.content.decode()
    assert not CalibrationSpec.objects.exists()


def test_the_certify_command_prints_the_loss_totals(project):
    rows = [(1.0, "admissible", ("supported", "not_supported"))] * 30 + [
        (1.0, "admissible", ("supported",))
    ] * 30
    calibration_project(project, {"calibration": records("c", rows)})
    spec = make_spec(project, loss=SHARE, thresholds=[1.0], alpha="0.5")
    out = io.StringIO()
    call_command("certify", "--project", "study", "--spec", str(spec.pk), stdout=out)
    lines = out.getvalue().splitlines()
    assert (
        "  loss bounded in [0, 1]: unsupported_claim_share; Hoeffding–Bentkus p-values and "
        "bounds; total loss of used answers 15"
    ) in lines
    header = next(line for line in lines if line.strip().startswith("#"))
    assert header.split()[:4] == ["#", "threshold", "m", "loss"]
    row = lines[lines.index(next(line for line in lines if line.strip().startswith("#"))) + 2]
    assert row.split()[:5] == ["0", "1.0", "60", "15", "60"]


def test_the_revise_form_starts_from_a_candidate_field_loss(project, login):
    client = login("manager")
    spec = make_spec(
        project, loss={"kind": "bounded", "source": "candidate_field", "field": "metadata.loss"}
    )
    page = client.get(f"{PAGES}/specs/{spec.pk}/revise/").content.decode()
    assert '<option value="candidate_field" selected>' in page
    assert 'value="metadata.loss"' in page
    response = client.post(
        f"{PAGES}/specs/{spec.pk}/revise/",
        {**FORM, "name": spec.name, "loss": "candidate_field", "loss_field": "metadata.other"},
    )
    assert response.status_code == 302
    new = CalibrationSpec.objects.get(previous=spec)
    assert (new.loss, new.loss_field) == ("candidate_field", "metadata.other")
