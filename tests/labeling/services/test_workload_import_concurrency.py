"""Concurrent imports into one project never duplicate or corrupt rows."""

from __future__ import annotations

import io
import threading

import pytest
from django.db import connection

from labeling.importers.native import read_jsonl
from labeling.models import CandidateAnswer, Question
from labeling.services import project_create, workload_import
from tests.conftest import jsonl_bytes, native_record


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_imports_of_the_same_records_create_them_once():
    # given one project and two different files holding the same 50 records
    project = project_create(slug="race", name="Race")
    records = [native_record(f"q{i}") for i in range(50)]
    files = [jsonl_bytes(records), jsonl_bytes(reversed(records))]
    results, failures = [], []
    barrier = threading.Barrier(2)

    def run(n: int) -> None:
        try:
            barrier.wait()
            results.append(
                workload_import(
                    project=project,
                    records=read_jsonl(io.BytesIO(files[n])),
                    format="native",
                    filename=f"f{n}.jsonl",
                    file_sha256=str(n) * 64,
                )
            )
        except Exception as exc:  # noqa: BLE001 - the test reports any failure
            failures.append(exc)
        finally:
            connection.close()

    # when both run at once
    threads = [threading.Thread(target=run, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    # then one created everything and the other found nothing new
    assert failures == []
    assert sorted(r.created.get("questions", 0) for r in results) == [0, 50]
    assert Question.objects.count() == 50
    assert CandidateAnswer.objects.count() == 100
