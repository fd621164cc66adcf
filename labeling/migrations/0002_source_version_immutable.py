"""Database triggers that refuse any change to a pinned source text (DESIGN.md §1).

Deletion is already refused by ``on_delete=PROTECT`` on every reference; these triggers stop
UPDATEs of ``text``, ``sha256`` and ``length`` from any client, not only from Django.
"""

from django.db import migrations

SQLITE = [
    """CREATE TRIGGER labeling_sourceversion_immutable
    BEFORE UPDATE OF text, sha256, length ON labeling_sourceversion
    BEGIN SELECT RAISE(ABORT, 'source versions are immutable: a changed text is a new version'); END""",
]
SQLITE_REVERSE = ["DROP TRIGGER IF EXISTS labeling_sourceversion_immutable"]
POSTGRES = [
    """CREATE OR REPLACE FUNCTION labeling_sourceversion_refuse_update() RETURNS trigger AS $$
    BEGIN
        RAISE EXCEPTION 'source versions are immutable: a changed text is a new version (id %)', OLD.id;
    END
    $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER labeling_sourceversion_immutable
    BEFORE UPDATE OF text, sha256, length ON labeling_sourceversion
    FOR EACH ROW EXECUTE FUNCTION labeling_sourceversion_refuse_update()""",
]
POSTGRES_REVERSE = [
    "DROP TRIGGER IF EXISTS labeling_sourceversion_immutable ON labeling_sourceversion",
    "DROP FUNCTION IF EXISTS labeling_sourceversion_refuse_update()",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for sql in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [("labeling", "0001_initial")]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE, "postgresql": POSTGRES}),
            _run({"sqlite": SQLITE_REVERSE, "postgresql": POSTGRES_REVERSE}),
        )
    ]
