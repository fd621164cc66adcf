"""Staleness marks of derived results: an insert-only change log (an outbox).

Every write that changes an input of a result computed in the background (the agreement
statistics, the calibration runs, the evaluator audits, the per-person reliability) inserts one
:class:`DerivedChange` row per affected kind, in its own transaction. A row is never updated;
the recomputation that covered it deletes it. So a result is current exactly when no row of its
(project, kind) is left, and nothing depends on a message reaching the broker. Inserts take no
lock on a shared row: many label writers never wait for each other here.
"""

from __future__ import annotations

from django.db import models

from labeling.models.catalog import Item, Project


class DerivedKind(models.TextChoices):
    """The kinds of derived results, recomputed each as one unit per project."""

    AGREEMENT = "agreement", "agreement statistics"
    CALIBRATION = "calibration", "calibration runs"
    AUDIT = "audit", "evaluator audits"
    RELIABILITY = "reliability", "per-person reliability"


class DerivedChange(models.Model):
    """One change of an input of a project's derived result of one kind (insert-only).

    The id orders the changes: the generation of a (project, kind) is the largest id written
    for it, and a recomputation records the largest id it covered.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=DerivedKind.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["project", "kind", "id"], name="derived_change_pk_idx")]

    def __str__(self) -> str:
        return f"{self.kind} change {self.pk} of project {self.project_id}"


class VoteTally(models.Model):
    """A project's vote tally (``labeling.tally``) as of its last fold.

    The project's current tally is this one plus its :class:`VoteTallyDelta` rows, and equals
    the tally of its items' :class:`ItemVotes`. Written only by the fold
    (``labeling.services.vote_tally.vote_tally_fold``); absent until the first fold, which then
    counts every item first.
    """

    project = models.OneToOneField(
        Project, primary_key=True, on_delete=models.CASCADE, related_name="+"
    )
    counts = models.JSONField(default=list)
    folded_at = models.DateTimeField(null=True, blank=True)
    # The version imported votes that record none counted under at the last full count: when
    # it changes (labelling starts under a later draft), every item is counted again.
    default_version = models.PositiveIntegerField(null=True, blank=True)

    def __str__(self) -> str:
        return f"vote tally of project {self.project_id}"


class ItemVotes(models.Model):
    """One item's votes as last counted into its project's tally.

    ``votes``: ``[policy version, level, unit id, rater id, value]`` lists, sorted (the rows of
    ``labeling.selectors.votes.vote_rows`` without the item id). Kept so that a change of the
    item's votes can be counted as the difference of two small tallies.
    """

    item = models.OneToOneField(Item, primary_key=True, on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    votes = models.JSONField(default=list)

    def __str__(self) -> str:
        return f"counted votes of item {self.item_id}"


class VoteTallyDelta(models.Model):
    """A change of a project's vote tally not yet folded into :class:`VoteTally` (insert-only).

    Written in the transaction that changed the votes, beside the items' new tallies; the fold
    adds it to the project's tally and deletes it in one transaction.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    counts = models.JSONField()

    class Meta:
        indexes = [models.Index(fields=["project", "id"], name="vote_tally_delta_idx")]

    def __str__(self) -> str:
        return f"vote tally change {self.pk} of project {self.project_id}"
