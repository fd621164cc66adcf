"""PostgreSQL triggers that back up the project's label-write lock (labeling/locks.py).

Every label-writing service takes ``project_label_writes_lock`` (an advisory lock on
``(0x6C61626C, project id)``, shared) before its first row a release pins gets an id, and a
release freeze takes the same key exclusive. These statement triggers take the same shared lock
for the projects of the rows an INSERT (or COPY) wrote, so a transaction that inserts such rows
by any other path (a shell, a script, a new code path) still holds the lock from the end of
that statement until it ends: a freeze then waits for it instead of pinning a cutoff its rows
could fall under. For the services the lock is already held and taking it again returns at
once. SQLite serialises writers and needs none.
"""

from django.db import migrations

# labeling.locks.LABEL_WRITES_NAMESPACE, copied: a migration must not change with the code.
NAMESPACE = 0x6C61626C

# table → the SELECT of the distinct projects of its new rows (``new_rows``).
PROJECTS = {
    "labeling_labelpolicy": "SELECT DISTINCT n.project_id FROM new_rows n",
    "labeling_sourceversion": (
        "SELECT DISTINCT d.project_id FROM new_rows n"
        " JOIN labeling_sourcedocument d ON d.id = n.document_id"
    ),
    "labeling_candidateanswer": (
        "SELECT DISTINCT q.project_id FROM new_rows n"
        " JOIN labeling_question q ON q.id = n.question_id"
    ),
    "labeling_priorannotation": (
        "SELECT DISTINCT q.project_id FROM new_rows n"
        " JOIN labeling_candidateanswer c ON c.id = n.candidate_id"
        " JOIN labeling_question q ON q.id = c.question_id"
    ),
    "labeling_evaluatorlabel": (
        "SELECT DISTINCT q.project_id FROM new_rows n"
        " JOIN labeling_candidateanswer c ON c.id = n.candidate_id"
        " JOIN labeling_question q ON q.id = c.question_id"
    ),
    "labeling_resolution": (
        "SELECT DISTINCT i.project_id FROM new_rows n JOIN labeling_item i ON i.id = n.item_id"
    ),
    "labeling_annotationrevision": (
        "SELECT DISTINCT i.project_id FROM new_rows n"
        " JOIN labeling_annotation a ON a.id = n.annotation_id"
        " JOIN labeling_item i ON i.id = a.item_id"
    ),
}

POSTGRES = [
    statement
    for table, projects in PROJECTS.items()
    for statement in (
        f"""CREATE OR REPLACE FUNCTION {table}_label_writes_lock() RETURNS trigger AS $$
        DECLARE
            project bigint;
        BEGIN
            FOR project IN {projects} ORDER BY 1 LOOP
                PERFORM pg_advisory_xact_lock_shared({NAMESPACE}, project::integer);
            END LOOP;
            RETURN NULL;
        END
        $$ LANGUAGE plpgsql""",
        f"""CREATE TRIGGER {table}_label_writes_lock AFTER INSERT ON {table}
        REFERENCING NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION {table}_label_writes_lock()""",
    )
]
POSTGRES_REVERSE = [
    statement
    for table in PROJECTS
    for statement in (
        f"DROP TRIGGER IF EXISTS {table}_label_writes_lock ON {table}",
        f"DROP FUNCTION IF EXISTS {table}_label_writes_lock()",
    )
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for sql in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [("labeling", "0006_release_provenance")]

    operations = [
        migrations.RunPython(_run({"postgresql": POSTGRES}), _run({"postgresql": POSTGRES_REVERSE}))
    ]
