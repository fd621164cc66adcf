"""The label loop's query budgets: POST .../assignments/next/ and PUT .../annotation/.

An annotator repeats these two requests all day; each is a fixed, small number of queries
whatever the size of the project (the benchmark tests/benchmarks/bench_vs_labelstudio.py
measures their latency under load).
"""

from __future__ import annotations

import pytest
from django.db import connection

from labeling.models import Role
from labeling.services.vote_tally import vote_tally_fold
from tests.factories import work_record

pytestmark = pytest.mark.django_db

# next: the token, its user and the project (plain statements, cheaper in CPU than one query
# with a join through the ORM; the token's last use is stamped at most once a minute); in the
# claim's transaction (its savepoint) the membership (locked) and its project, a lease already
# held, the labelling policy, the actor's qualification (gold rule) and the next item; in the
# slot's savepoint the slots taken, the count's compare-and-set and the new assignment; then the
# form's item, claims, policy and sources (BEGIN, COMMIT and four savepoint statements are
# counted too).
NEXT_BUDGET = 22
# submit: the token, its user and the project; in the write's transaction (savepoint) the
# assignment, the item's lock, the policy (read under the lock: the one the labels are stored
# under), the claims, the lease's compare-and-set (no second read of the assignment), the
# item's version, the annotation, its revision, its one claim label, the annotation's current
# revision, the change marks, the vote tally's three (the item's votes with those last counted,
# in one statement; the item's counted votes; the change of the counts) and the vote count. The
# response is built from the rows just
# written (no read-back). The marked kinds' scheduling runs after the commit (not here: the
# test's transaction never commits).
SUBMIT_BUDGET = 22
# The submit that completes an item's overlap compares its votes too: the open item, the votes
# (annotations with their current revisions, claim labels, evidence; no prior-vote read for an
# item that counts none), the claims, the resolution's number, the consensus resolution with
# its claim label, the item's status, whether a calibration spec and a declared audit read the
# resolved item (one query each: labeling.derived.derived_mark_touched) and the marks of the
# resolution's kinds.
COMPARE_BUDGET = 12
# PostgreSQL adds one per label write: the shared advisory lock against a release freeze.
FREEZE_LOCK = {"postgresql": 1}


@pytest.fixture
def big(project, import_records, member):
    """A project of 40 questions (80 items), overlap 2, started: the budget must not grow."""
    from tests.factories import start_labelling

    import_records([work_record(f"q{i}") for i in range(40)])
    started = start_labelling(project, overlap=2)
    vote_tally_fold(project=started)  # counted: every vote then writes its change of the counts
    return started


def test_next_and_submit_stay_within_their_budgets(
    big, member, client_for, django_assert_num_queries
):
    annotator = member(Role.ANNOTATOR)
    client = client_for(annotator)
    base = "/api/projects/study/assignments"
    client.get("/api/projects/study/")  # the token's last-use stamp (once a minute) is written
    for _ in range(3):  # the budget holds on every turn, not only the first
        with django_assert_num_queries(NEXT_BUDGET):
            served = client.post(f"{base}/next/")
        assert served.status_code == 200
        form = served.json()
        body = {
            "answer_label": "admissible",
            "claims": [{"claim_id": c["id"], "label": "not_supported"} for c in form["claims"]],
        }
        with django_assert_num_queries(SUBMIT_BUDGET + FREEZE_LOCK.get(connection.vendor, 0)):
            saved = client.put(f"{base}/{form['assignment_id']}/annotation/", body, format="json")
        assert saved.status_code == 200, saved.content
        assert [c["label"] for c in saved.json()["claims"]] == [c["label"] for c in body["claims"]]


def test_the_submit_that_completes_an_item_compares_within_its_budget(
    big, member, client_for, django_assert_num_queries
):
    from labeling.models import Item, ItemStatus

    first, second = member(Role.ANNOTATOR), member(Role.ANNOTATOR)
    base = "/api/projects/study/assignments"
    for n, annotator in enumerate((first, second)):
        client = client_for(annotator)
        client.get("/api/projects/study/")
        form = client.post(f"{base}/next/").json()
        body = {
            "answer_label": "admissible",
            "claims": [{"claim_id": c["id"], "label": "not_supported"} for c in form["claims"]],
        }
        budget = SUBMIT_BUDGET + FREEZE_LOCK.get(connection.vendor, 0) + n * COMPARE_BUDGET
        with django_assert_num_queries(budget):
            saved = client.put(f"{base}/{form['assignment_id']}/annotation/", body, format="json")
        assert saved.status_code == 200, saved.content
    assert Item.objects.get(pk=form["item_id"]).status == ItemStatus.RESOLVED
