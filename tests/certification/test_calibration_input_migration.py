"""The data migration that moves each run's input snapshot into one row per distinct snapshot."""

from __future__ import annotations

import hashlib

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from certification.contract import canonical_json

BEFORE = [("certification", "0006_work_heartbeats_and_calibration_inputs")]
AFTER = [("certification", "0008_calibration_run_input_required")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_existing_runs_share_one_stored_snapshot_per_distinct_input():
    apps = _migrate(BEFORE)
    try:
        project = apps.get_model("labeling", "Project").objects.create(slug="old", name="Old")
        spec_model = apps.get_model("certification", "CalibrationSpec")
        spec_fields = {
            "project": project,
            "version": 1,
            "method": "selective_risk",
            "alpha": "0.1",
            "delta": "0.05",
            "selector": "is_selected",
            "content_sha256": "a" * 64,
        }
        spec = spec_model.objects.create(name="s", **spec_fields)
        other = spec_model.objects.create(name="t", **{**spec_fields, "content_sha256": "b" * 64})
        run_model = apps.get_model("certification", "CalibrationRun")
        shared = {"questions": [{"id": 1, "score": 0.1 + 0.2, "text": "Zürich"}], "n": 1}
        alone = {"questions": [], "n": 0}
        common = {"trigger": "manual", "stats_version": 1, "project": project}
        runs = [
            run_model.objects.create(
                spec=spec, spec_sha256="a" * 64, input_sha256="1" * 64, inputs=shared, **common
            ),
            run_model.objects.create(
                spec=other, spec_sha256="b" * 64, input_sha256="2" * 64, inputs=shared, **common
            ),
            run_model.objects.create(
                spec=spec,
                spec_sha256="a" * 64,
                input_sha256="3" * 64,
                inputs=alone,
                status="failed",
                error="x",
                **common,
            ),
        ]
        apps = _migrate(AFTER)
        stored = apps.get_model("certification", "CalibrationInput").objects.order_by("pk")
        assert [row.snapshot for row in stored] == [shared, alone]
        # keyed by the same hash the service computes for new snapshots
        assert [row.sha256 for row in stored] == [
            hashlib.sha256(canonical_json(snap).encode()).hexdigest() for snap in (shared, alone)
        ]
        migrated = apps.get_model("certification", "CalibrationRun").objects.order_by("pk")
        assert [r.pk for r in migrated] == [r.pk for r in runs]
        assert [r.input_id for r in migrated] == [stored[0].pk, stored[0].pk, stored[1].pk]
        # the snapshot reads back as it was stored (in canonical form, byte for byte)
        assert migrated[0].input.snapshot == shared
        assert canonical_json(migrated[0].input.snapshot) == canonical_json(shared)
    finally:
        # leave the database fully migrated for the next tests
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
