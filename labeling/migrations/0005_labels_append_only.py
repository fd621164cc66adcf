"""Triggers that make labels append-only (DESIGN.md §7: every change of a label is kept).

Annotation revisions, their claim labels and evidence, resolutions, their claim labels and
evidence refuse any UPDATE from any client; a change is a new revision or a new resolution.
DELETE stays possible only by cascade from a project (the app offers no delete of labels, and the
admin shows them read-only).
"""

from django.db import migrations

TABLES = [
    "labeling_annotationrevision",
    "labeling_claimlabel",
    "labeling_evidencespan",
    "labeling_resolution",
    "labeling_resolvedclaimlabel",
    "labeling_resolvedevidence",
]

SQLITE = [
    f"""CREATE TRIGGER {table}_append_only BEFORE UPDATE ON {table}
    BEGIN SELECT RAISE(ABORT, 'labels are append-only: {table} rows are never updated'); END"""
    for table in TABLES
]
SQLITE_REVERSE = [f"DROP TRIGGER IF EXISTS {table}_append_only" for table in TABLES]
POSTGRES = [
    """CREATE OR REPLACE FUNCTION labeling_refuse_label_update() RETURNS trigger AS $$
    BEGIN
        RAISE EXCEPTION 'labels are append-only: % rows are never updated (id %)',
            TG_TABLE_NAME, OLD.id;
    END
    $$ LANGUAGE plpgsql""",
    *[
        f"""CREATE TRIGGER {table}_append_only BEFORE UPDATE ON {table}
        FOR EACH ROW EXECUTE FUNCTION labeling_refuse_label_update()"""
        for table in TABLES
    ],
]
POSTGRES_REVERSE = [
    *[f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}" for table in TABLES],
    "DROP FUNCTION IF EXISTS labeling_refuse_label_update()",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for sql in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [("labeling", "0004_work")]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE, "postgresql": POSTGRES}),
            _run({"sqlite": SQLITE_REVERSE, "postgresql": POSTGRES_REVERSE}),
        )
    ]
