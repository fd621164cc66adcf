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

# table → the SELECT of the distinct projects of its new rows (``new_rows``). One indexed
# lookup per distinct parent (a correlated subquery), never a scan of the parent table: a
# single-row insert (a submit) costs one lookup.
PROJECTS = {
    "labeling_labelpolicy": "SELECT DISTINCT n.project_id FROM new_rows n",
    "labeling_sourceversion": (
        "SELECT DISTINCT (SELECT d.project_id FROM labeling_sourcedocument d"
        " WHERE d.id = n.document_id) FROM (SELECT DISTINCT document_id FROM new_rows) n"
    ),
    "labeling_candidateanswer": (
        "SELECT DISTINCT (SELECT q.project_id FROM labeling_question q"
        " WHERE q.id = n.question_id) FROM (SELECT DISTINCT question_id FROM new_rows) n"
    ),
    "labeling_priorannotation": (
        "SELECT DISTINCT (SELECT q.project_id FROM labeling_candidateanswer c"
        " JOIN labeling_question q ON q.id = c.question_id WHERE c.id = n.candidate_id)"
        " FROM (SELECT DISTINCT candidate_id FROM new_rows) n"
    ),
    "labeling_evaluatorlabel": (
        "SELECT DISTINCT (SELECT q.project_id FROM labeling_candidateanswer c"
        " JOIN labeling_question q ON q.id = c.question_id WHERE c.id = n.candidate_id)"
        " FROM (SELECT DISTINCT candidate_id FROM new_rows) n"
    ),
    "labeling_resolution": (
        "SELECT DISTINCT (SELECT i.project_id FROM labeling_item i WHERE i.id = n.item_id)"
        " FROM (SELECT DISTINCT item_id FROM new_rows) n"
    ),
    "labeling_annotationrevision": (
        "SELECT DISTINCT (SELECT i.project_id FROM labeling_annotation a"
        " JOIN labeling_item i ON i.id = a.item_id WHERE a.id = n.annotation_id)"
        " FROM (SELECT DISTINCT annotation_id FROM new_rows) n"
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
    dependencies = [("labeling", "0007_jobs")]

    operations = [
        migrations.RunPython(_run({"postgresql": POSTGRES}), _run({"postgresql": POSTGRES_REVERSE}))
    ]
