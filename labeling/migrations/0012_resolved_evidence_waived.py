"""Resolved claim labels record whether their evidence was waived (imported votes, no span).

SQLite adds a NOT NULL column by rebuilding the table, which drops the table's append-only
trigger (0005); it is created again afterwards. PostgreSQL adds the column in place.
"""

from django.db import migrations, models

TABLE = "labeling_resolvedclaimlabel"
SQLITE_TRIGGER = f"""CREATE TRIGGER IF NOT EXISTS {TABLE}_append_only BEFORE UPDATE ON {TABLE}
    BEGIN SELECT RAISE(ABORT, 'labels are append-only: {TABLE} rows are never updated'); END"""


def _trigger_again(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(SQLITE_TRIGGER, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0011_policy_versions"),
    ]

    operations = [
        migrations.AddField(
            model_name="resolvedclaimlabel",
            name="evidence_waived",
            field=models.BooleanField(
                default=False,
                help_text="Accepted without evidence: adopts imported votes that cited no span.",
            ),
        ),
        migrations.RunPython(_trigger_again, _trigger_again),
    ]
