"""Move every run's input snapshot into one ``CalibrationInput`` row per distinct snapshot."""

import hashlib
import json

from django.db import migrations


def _sha256(snapshot):
    # The canonical JSON of certification.contract.canonical_json, frozen here.
    text = json.dumps(
        snapshot, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def forwards(apps, schema_editor):
    CalibrationRun = apps.get_model("certification", "CalibrationRun")
    CalibrationInput = apps.get_model("certification", "CalibrationInput")
    known = {}
    for run in CalibrationRun.objects.order_by("pk").only("pk", "inputs").iterator():
        digest = _sha256(run.inputs)
        if digest not in known:
            row, _ = CalibrationInput.objects.get_or_create(
                sha256=digest, defaults={"snapshot": run.inputs}
            )
            known[digest] = row.pk
        CalibrationRun.objects.filter(pk=run.pk).update(input_id=known[digest])


def backwards(apps, schema_editor):
    CalibrationRun = apps.get_model("certification", "CalibrationRun")
    for run in CalibrationRun.objects.select_related("input").iterator():
        CalibrationRun.objects.filter(pk=run.pk).update(inputs=run.input.snapshot)


class Migration(migrations.Migration):
    dependencies = [
        ("certification", "0006_work_heartbeats_and_calibration_inputs"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
