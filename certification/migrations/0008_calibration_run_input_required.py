"""Every run reads its snapshot from its ``CalibrationInput``; the per-run copy is dropped."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("certification", "0007_calibration_inputs_data"),
    ]

    operations = [
        migrations.RemoveField(
            model_name="calibrationrun",
            name="inputs",
        ),
        migrations.AlterField(
            model_name="calibrationrun",
            name="input",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="runs",
                to="certification.calibrationinput",
            ),
        ),
    ]
