"""Gold items: reference labels (append-only), gold work on assignments, qualification.

The gold reference tables refuse any UPDATE, like the other label tables (migration 0005): a
changed reference is a new revision. The trigger function of 0005 is reused on PostgreSQL.
"""

import django.db.models.deletion
import django.db.models.expressions
import django.db.models.functions.text
import django.db.models.lookups
from django.conf import settings
from django.db import migrations, models

GOLD_TABLES = ["labeling_goldreference", "labeling_goldclaimlabel", "labeling_goldevidence"]
SQLITE = [
    f"""CREATE TRIGGER {table}_append_only BEFORE UPDATE ON {table}
    BEGIN SELECT RAISE(ABORT, 'labels are append-only: {table} rows are never updated'); END"""
    for table in GOLD_TABLES
]
SQLITE_REVERSE = [f"DROP TRIGGER IF EXISTS {table}_append_only" for table in GOLD_TABLES]
POSTGRES = [
    f"""CREATE TRIGGER {table}_append_only BEFORE UPDATE ON {table}
    FOR EACH ROW EXECUTE FUNCTION labeling_refuse_label_update()"""
    for table in GOLD_TABLES
]
POSTGRES_REVERSE = [
    f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}" for table in GOLD_TABLES
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for sql in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0014_api_tokens"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="GoldClaimLabel",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("label", models.CharField(max_length=64)),
                ("reason", models.CharField(blank=True, max_length=64, null=True)),
            ],
            options={
                "ordering": ["reference", "claim"],
            },
        ),
        migrations.CreateModel(
            name="GoldEvidence",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("start", models.PositiveIntegerField()),
                ("end", models.PositiveIntegerField()),
                ("quote", models.TextField()),
            ],
            options={
                "ordering": ["claim_label", "source_version", "start", "end"],
            },
        ),
        migrations.CreateModel(
            name="GoldReference",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("number", models.PositiveIntegerField()),
                ("answer_label", models.CharField(max_length=64)),
                ("answer_reason", models.CharField(blank=True, max_length=64, null=True)),
                (
                    "rationale",
                    models.TextField(blank=True, help_text="Why this is the reference (managers)."),
                ),
                ("content_sha256", models.CharField(max_length=64)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={
                "ordering": ["item", "number"],
            },
        ),
        migrations.CreateModel(
            name="Qualification",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("passed", "passed"),
                            ("failed", "below the threshold: awaiting a manager's decision"),
                            ("admitted", "admitted by a manager"),
                            ("refused", "not admitted by a manager"),
                        ],
                        max_length=10,
                    ),
                ),
                ("items", models.PositiveIntegerField()),
                ("agreed", models.PositiveIntegerField()),
                ("compared", models.PositiveIntegerField()),
                ("evaluated_at", models.DateTimeField()),
                ("decided_at", models.DateTimeField(blank=True, null=True)),
                ("decision_note", models.TextField(blank=True)),
            ],
            options={
                "ordering": ["project", "annotator"],
            },
        ),
        migrations.RemoveConstraint(
            model_name="assignment",
            name="assignment_unique_live_slot",
        ),
        migrations.RemoveConstraint(
            model_name="item",
            name="item_status",
        ),
        migrations.AddField(
            model_name="assignment",
            name="gold",
            field=models.BooleanField(
                db_default=False,
                default=False,
                help_text="Gold work: never a vote, never shown to the annotator.",
            ),
        ),
        migrations.AddField(
            model_name="labelpolicy",
            name="gold_rate",
            field=models.FloatField(
                default=0.0,
                help_text="Probability in [0, 1] that 'next item' serves a gold item.",
            ),
        ),
        migrations.AddField(
            model_name="labelpolicy",
            name="qualification_items",
            field=models.PositiveSmallIntegerField(
                default=5, help_text="k: gold items an annotator labels to qualify."
            ),
        ),
        migrations.AddField(
            model_name="labelpolicy",
            name="qualification_required",
            field=models.BooleanField(
                default=False,
                help_text="Must an annotator qualify on gold items before regular work?",
            ),
        ),
        migrations.AddField(
            model_name="labelpolicy",
            name="qualification_threshold",
            field=models.FloatField(
                default=0.8,
                help_text="Share in [0, 1] of labels equal to the reference that qualifies.",
            ),
        ),
        migrations.AlterField(
            model_name="item",
            name="status",
            field=models.CharField(
                choices=[
                    ("open", "open (collecting annotations)"),
                    ("disagreement", "in the disagreement queue"),
                    ("resolved", "resolved"),
                    (
                        "gold",
                        "gold item (reference labels; served to check annotators, never a vote)",
                    ),
                ],
                db_default="open",
                max_length=12,
            ),
        ),
        migrations.AddConstraint(
            model_name="assignment",
            constraint=models.UniqueConstraint(
                condition=models.Q(("gold", False), ("status__in", ("leased", "submitted"))),
                fields=("item", "slot"),
                name="assignment_unique_live_slot",
            ),
        ),
        migrations.AddConstraint(
            model_name="item",
            constraint=models.CheckConstraint(
                condition=models.Q(("status__in", ["open", "disagreement", "resolved", "gold"])),
                name="item_status",
            ),
        ),
        migrations.AddConstraint(
            model_name="labelpolicy",
            constraint=models.CheckConstraint(
                condition=models.Q(("gold_rate__gte", 0), ("gold_rate__lte", 1)),
                name="policy_gold_rate_range",
            ),
        ),
        migrations.AddConstraint(
            model_name="labelpolicy",
            constraint=models.CheckConstraint(
                condition=models.Q(("qualification_items__gte", 1)),
                name="policy_qualification_items_positive",
            ),
        ),
        migrations.AddConstraint(
            model_name="labelpolicy",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("qualification_threshold__gte", 0), ("qualification_threshold__lte", 1)
                ),
                name="policy_qualification_threshold_range",
            ),
        ),
        migrations.AddField(
            model_name="goldclaimlabel",
            name="claim",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT, related_name="+", to="labeling.claim"
            ),
        ),
        migrations.AddField(
            model_name="goldevidence",
            name="claim_label",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="evidence",
                to="labeling.goldclaimlabel",
            ),
        ),
        migrations.AddField(
            model_name="goldevidence",
            name="source_version",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="labeling.sourceversion",
            ),
        ),
        migrations.AddField(
            model_name="goldreference",
            name="created_by",
            field=models.ForeignKey(
                blank=True,
                help_text="The manager who set it (None: an import run from the command line).",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="goldreference",
            name="import_batch",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="labeling.importbatch",
            ),
        ),
        migrations.AddField(
            model_name="goldreference",
            name="item",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="gold_references",
                to="labeling.item",
            ),
        ),
        migrations.AddField(
            model_name="goldreference",
            name="policy",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="labeling.labelpolicy",
            ),
        ),
        migrations.AddField(
            model_name="goldreference",
            name="supersedes",
            field=models.OneToOneField(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="superseded_by",
                to="labeling.goldreference",
            ),
        ),
        migrations.AddField(
            model_name="goldclaimlabel",
            name="reference",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="claim_labels",
                to="labeling.goldreference",
            ),
        ),
        migrations.AddField(
            model_name="qualification",
            name="annotator",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="qualifications",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="qualification",
            name="decided_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="qualification",
            name="policy",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="labeling.labelpolicy",
            ),
        ),
        migrations.AddField(
            model_name="qualification",
            name="project",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="qualifications",
                to="labeling.project",
            ),
        ),
        migrations.AddConstraint(
            model_name="goldevidence",
            constraint=models.UniqueConstraint(
                fields=("claim_label", "source_version", "start", "end"),
                name="gold_evidence_unique",
            ),
        ),
        migrations.AddConstraint(
            model_name="goldevidence",
            constraint=models.CheckConstraint(
                condition=models.Q(("end__gt", models.F("start"))), name="gold_evidence_order"
            ),
        ),
        migrations.AddConstraint(
            model_name="goldevidence",
            constraint=models.CheckConstraint(
                condition=django.db.models.lookups.Exact(
                    django.db.models.functions.text.Length("quote"),
                    django.db.models.expressions.CombinedExpression(
                        models.F("end"), "-", models.F("start")
                    ),
                ),
                name="gold_evidence_quote_length",
            ),
        ),
        migrations.AddConstraint(
            model_name="goldreference",
            constraint=models.UniqueConstraint(
                fields=("item", "number"), name="gold_reference_unique_number"
            ),
        ),
        migrations.AddConstraint(
            model_name="goldreference",
            constraint=models.CheckConstraint(
                condition=models.Q(("number__gte", 1)), name="gold_reference_number_positive"
            ),
        ),
        migrations.AddConstraint(
            model_name="goldclaimlabel",
            constraint=models.UniqueConstraint(
                fields=("reference", "claim"), name="gold_claim_label_unique"
            ),
        ),
        migrations.AddConstraint(
            model_name="qualification",
            constraint=models.UniqueConstraint(
                fields=("project", "annotator"), name="qualification_unique_annotator"
            ),
        ),
        migrations.AddConstraint(
            model_name="qualification",
            constraint=models.CheckConstraint(
                condition=models.Q(("status__in", ["passed", "failed", "admitted", "refused"])),
                name="qualification_status",
            ),
        ),
        migrations.AddConstraint(
            model_name="qualification",
            constraint=models.CheckConstraint(
                condition=models.Q(("agreed__lte", models.F("compared"))),
                name="qualification_agreed_le_compared",
            ),
        ),
        migrations.AddConstraint(
            model_name="qualification",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("decided_at__isnull", False),
                        ("decided_by__isnull", False),
                        ("status__in", ["admitted", "refused"]),
                    ),
                    ("status__in", ["passed", "failed"]),
                    _connector="OR",
                ),
                name="qualification_decision_has_manager",
            ),
        ),
        migrations.RunPython(
            _run({"sqlite": SQLITE, "postgresql": POSTGRES}),
            _run({"sqlite": SQLITE_REVERSE, "postgresql": POSTGRES_REVERSE}),
        ),
    ]
