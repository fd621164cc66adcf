"""drift_scores_record under concurrent requests: consecutive seq numbers in commit order."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from certification.models import AppliedScore, DriftWatch
from certification.services.drift import drift_scores_record
from labeling.services import project_create
from tests.certification.apply_world import apply_project, apply_run


@pytest.mark.django_db(transaction=True)
def test_concurrent_applies_number_every_decision_once():
    # given a done run and eight threads each recording five requests of three decisions
    with transaction.atomic():  # calibration_run_request locks the spec in its caller's block
        run = apply_run(apply_project(project_create(slug="race", name="Race")))
    start = threading.Barrier(8)
    errors = []

    def apply(worker):
        try:
            start.wait()
            for request in range(5):
                drift_scores_record(run=run, scores=[[worker + request / 10]] * 3)
        except Exception as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=apply, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # then every decision has its own number, 1 to 120 without a gap, and the watch counts them
    assert errors == []
    seqs = sorted(AppliedScore.objects.filter(run=run).values_list("seq", flat=True))
    assert seqs == list(range(1, 121))
    assert DriftWatch.objects.get(run=run).recorded == 120
    # and each request's three decisions are consecutive
    rows = AppliedScore.objects.filter(run=run).order_by("seq").values_list("scores", flat=True)
    values = [row[0] for row in rows]
    assert all(values[i] == values[i + 1] == values[i + 2] for i in range(0, 120, 3))
