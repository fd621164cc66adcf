"""GET /api/projects/<slug>/agreement/: the stored agreement report (certification.api)."""

from __future__ import annotations

import pytest

from certification.services import agreement_recompute
from labeling.models import Role

pytestmark = pytest.mark.django_db

URL = "/api/projects/study/agreement/"


@pytest.mark.parametrize(
    ("role", "status"),
    [
        (Role.MANAGER, 200),
        (Role.ADJUDICATOR, 200),
        (Role.ANNOTATOR, 403),
        ("nonmember", 404),
        ("anonymous", 401),
    ],
)
def test_agreement_access_by_role(api, started, role, status):
    assert api(role).get(URL).status_code == status


def test_before_any_computation_the_report_is_empty(api, started):
    body = api(Role.MANAGER).get(URL).json()
    freshness = body.pop("freshness")
    assert body == {
        "computed_at": None,
        "input_sha256": None,
        "identities_shown": False,
        "levels": [],
        "policy_version": None,
        "versions": [],
    }
    # and it says so: never computed, the import and the start (which freezes the version
    # imported votes count under) waiting as two newer changes
    assert (freshness["current"], freshness["covered_generation"]) == (False, 0)
    assert (freshness["newer_changes"], freshness["computed_at"]) == (2, None)


def test_managers_see_rater_names_adjudicators_see_pseudonyms(api, started, disputed):
    agreement_recompute(project_id=started.pk)
    usernames = {a.annotator.username for a in disputed.assignments.select_related("annotator")}

    as_manager = api(Role.MANAGER).get(URL).json()
    as_adjudicator = api(Role.ADJUDICATOR).get(URL)

    answer = as_manager["levels"][0]
    assert answer["level"] == "answer"
    assert answer["n_units"] == 1
    assert answer["label_counts"] == {"admissible": 1, "inadmissible": 1}
    assert set(answer) >= {"alpha", "fleiss_kappa", "percent_agreement", "pairs"}
    assert answer["percent_agreement"]["value"] == 0.0
    assert as_manager["identities_shown"] is True
    assert {answer["pairs"][0]["rater_a"], answer["pairs"][0]["rater_b"]} == usernames
    pair = as_adjudicator.json()["levels"][0]["pairs"][0]
    assert {pair["rater_a"], pair["rater_b"]} == {"Rater 1", "Rater 2"}
    # one shared unit: kappa undefined, so no interval to flag
    assert (pair["kappa"], pair["interval_reason"]) == (None, None)
    assert not any(name in as_adjudicator.content.decode() for name in usernames)
