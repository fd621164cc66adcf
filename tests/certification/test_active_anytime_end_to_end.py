"""An active, anytime-valid audit end to end through the Django test client: a manager declares
the audit with a target and draws an active sample on the pages, annotators label the drawn
items through the API (one disagreement is adjudicated), the audit page says "you may stop now"
and a release frozen on the release page records the sample design and each figure's kind."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from certification.models import AuditReport, AuditSample, Release
from labeling.models import Evaluator, Item, ItemStatus, Role
from tests.factories import calibration_candidate, calibration_record, start_labelling

pytestmark = pytest.mark.django_db

AUDITS = "/p/study/certification/audits"
API = "/api/projects/study"
#: 40 items: the evaluator (hhem, flag when score < 0.5) is sure of 36 (score 0.98, no error)
#: and unsure of 4 (score 0.4), of which people find the first 2 errors.
SURE, UNSURE = 36, 4


def _records() -> list[dict]:
    records = []
    for i in range(SURE + UNSURE):
        candidate = calibration_candidate("c0", answer=f"a{i}", label=None)
        candidate["evaluator_labels"] = [
            {"evaluator": "hhem", "version": "v1", "score": 0.98 if i < SURE else 0.4}
        ]
        records.append(calibration_record(f"q{i:02d}", [candidate]))
    return records


def _human_error(item: Item) -> bool:
    index = int(item.candidate.question.external_id[1:])
    return index in (SURE, SURE + 1)


def _annotator(member) -> APIClient:
    client = APIClient()
    client.force_login(member(Role.ANNOTATOR))
    return client


def _label(client: APIClient, members: set[int], *, disagree_on: int | None = None) -> None:
    """Label every drawn item: they are served first (one claim and one submission each)."""
    for _ in members:
        body = client.post(f"{API}/assignments/next/").json()
        assert body["item_id"] in members
        item = Item.objects.select_related("candidate__question").get(pk=body["item_id"])
        error = _human_error(item) != (item.pk == disagree_on)
        response = client.put(
            f"{API}/assignments/{body['assignment_id']}/annotation/",
            {"answer_label": "inadmissible" if error else "admissible", "claims": []},
            format="json",
        )
        assert response.status_code in (200, 201), response.content


def test_an_active_audit_stops_anytime_and_the_release_says_its_design(
    project, import_records, member, login, django_capture_on_commit_callbacks
):
    # given 40 items judged by hhem, labelling started with overlap 2
    import_records(_records())
    start_labelling(project, overlap=2)
    hhem = Evaluator.objects.get(project=project, name="hhem")
    manager = login(Role.MANAGER)

    # when the manager declares the audit, sets a target of 0.5 and draws an active sample
    response = manager.post(
        f"{AUDITS}/{hhem.pk}/",
        {
            "human_positive": "inadmissible",
            "score_threshold": "0.5",
            "flag_when": "<",
            "confidence": "0.95",
        },
    )
    assert response.status_code == 302, response.content.decode()[-3000:]
    assert manager.post(f"{AUDITS}/{hhem.pk}/target/", {"anytime_target": "0.5"}).status_code == 302
    response = manager.post(
        f"{AUDITS}/{hhem.pk}/samples/",
        {"kind": "active", "size": "20", "seed": "0", "floor": "0.8"},
    )
    assert response.status_code == 302, response.content.decode()[-3000:]
    sample = AuditSample.objects.get()
    members = set(sample.members.values_list("item_id", flat=True))
    assert sample.kind == "active" and 10 < len(members) < 30
    # the unsure items are likelier to be drawn
    pi = {int(pk): p for pk, (p, _) in sample.population.items()}
    assert len(set(pi.values())) == 2 and max(pi.values()) > min(pi.values())
    html = manager.get(f"{AUDITS}/{hhem.pk}/").content.decode()
    assert "Keep labelling" in html  # nothing labelled yet

    # and two annotators label the drawn items, disagreeing on one, which is adjudicated
    disputed = min(members)
    with django_capture_on_commit_callbacks(execute=True):
        _label(_annotator(member), members)
        _label(_annotator(member), members, disagree_on=disputed)
        adjudicator = APIClient()
        adjudicator.force_login(member(Role.ADJUDICATOR))
        item = Item.objects.select_related("candidate__question").get(pk=disputed)
        assert item.status == ItemStatus.DISAGREEMENT
        response = adjudicator.post(
            f"{API}/disagreements/{disputed}/resolve/",
            {
                "expected_version": item.version,
                "answer_label": "inadmissible" if _human_error(item) else "admissible",
                "claims": [],
                "rationale": "The first annotator read it right.",
            },
            format="json",
        )
        assert response.status_code == 201, response.content
    assert Item.objects.filter(pk__in=members, status=ItemStatus.RESOLVED).count() == len(members)

    # then the audit page says the manager may stop, and which figure is which kind
    report = AuditReport.objects.get(evaluator=hhem)
    anytime = report.result["anytime"]
    assert anytime["design"] == "active" and anytime["n_prefix"] == 40
    assert anytime["error_rate"]["n_labelled"] == len(members)
    upper = anytime["error_rate"]["upper_bound"]
    assert upper < 0.5 and anytime["stop"]["stop"] is True
    html = manager.get(f"{AUDITS}/{hhem.pk}/").content.decode()
    assert (
        f"You may stop now: the anytime-valid upper bound {upper:.3f} is below your target 0.5."
        in html
    )
    assert "Workload error rate (people, active sample)" in html and 'id="anytime-active"' in html
    assert "active (IPW prediction-powered), fixed-n" in html
    # the API gives the same figures with their kinds
    body = manager.get(f"{API}/audits/{hhem.pk}/").json()
    assert body["result"]["anytime"]["error_rate"]["kind"] == "anytime-valid"
    assert body["result"]["anytime"]["stop"]["stop"] is True

    # when the manager freezes a release
    response = manager.post("/p/study/releases/", {"version": "1", "notes": ""})
    assert response.status_code == 302, response.content
    release = Release.objects.get(project=project)
    # then it records the audit's design and the kind of each figure
    (audit,) = release.report["audits"]
    assert audit["design"] == "active"
    assert audit["figures"] == {"active": "fixed-n", "anytime": "anytime-valid"}
    html = manager.get(f"/p/study/releases/{release.pk}/").content.decode()
    assert 'data-design="active"' in html and "anytime: anytime-valid" in html
