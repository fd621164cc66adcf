# Indexes of the label loop, so that "next item" and the labelling page cost the same in a project
# of any size:
# - item_free_queue_idx: the open items with a free slot, in serving order. "Next item" walks it
#   instead of every item of the project (a claim used to step over each full item ahead of the
#   first free one), and the workbench's "left" count reads it up to its cap.
# - assignment_annotator_idx gains (submitted_at, id): "Revise previous" (the annotator's last
#   submission) reads one row instead of joining every item of the project to their submissions.

from django.db import migrations, models
from django.db.models import F, Q


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0018_vote_tally"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="item",
            index=models.Index(
                condition=Q(status="open", assigned_count__lt=F("overlap") - F("prior_votes")),
                fields=["project", "queue_position", "id"],
                name="item_free_queue_idx",
            ),
        ),
        migrations.RemoveIndex(model_name="assignment", name="assignment_annotator_idx"),
        migrations.AddIndex(
            model_name="assignment",
            index=models.Index(
                fields=["annotator", "status", "submitted_at", "id"],
                name="assignment_annotator_idx",
            ),
        ),
    ]
