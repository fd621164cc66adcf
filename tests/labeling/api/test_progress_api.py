"""GET /api/projects/<slug>/progress/: items by where they are in the flow."""

from __future__ import annotations

import pytest

from labeling.models import Role
from labeling.services import item_claim_next

pytestmark = pytest.mark.django_db

URL = "/api/projects/study/progress/"


@pytest.mark.parametrize(
    ("role", "status"),
    [
        (Role.MANAGER, 200),
        (Role.ADJUDICATOR, 200),
        (Role.ANNOTATOR, 403),  # the counts summarise other people's votes
        ("nonmember", 404),
        ("anonymous", 401),
    ],
)
def test_progress_access_by_role(api, started, role, status):
    assert api(role).get(URL).status_code == status


def test_counts_items_by_state(api, member, started, disputed):
    item_claim_next(project=started, actor=member(Role.ANNOTATOR))

    response = api(Role.MANAGER).get(URL)

    assert response.json() == {
        "total": 4,
        "open_untouched": 2,
        "in_progress": 1,
        "awaiting_adjudication": 1,
        "resolved_consensus": 0,
        "resolved_adjudicated": 0,
        "unresolved": 0,
    }
