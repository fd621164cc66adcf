"""Keep each project's vote tally (``labeling.tally``) current at the cost of the change.

Three tables hold it (``labeling.models.derived``):

- :class:`~labeling.models.ItemVotes`: each item's votes as last counted;
- :class:`~labeling.models.VoteTallyDelta`: insert-only changes of the project's tally;
- :class:`~labeling.models.VoteTally`: the project's tally as of the last fold.

The invariant: the project's tally plus its deltas equals the tally of its items' counted
votes. A write that changes an item's votes calls :func:`vote_tally_refresh` in its transaction,
under the item's lock: it reads the item's votes, stores them and writes the difference of the
two tallies (before and after) as one delta. So a vote costs a few small statements whatever
the project's size, and many annotators never wait for each other on a shared row.
:func:`vote_tally_fold` (the background agreement work) adds the deltas to the project's tally
and deletes them in one transaction.

The full count stays, as the checker and the repair: :func:`vote_tally_rebuild` counts every
item from scratch while it holds the project's label writes (the first fold of a project, a
change of the version that imported votes without one count under, and a manager's request to
recompute).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db import transaction
from django.db.transaction import TransactionManagementError
from django.utils import timezone

from labeling.locks import project_label_writes_lock, vote_tally_lock
from labeling.models import ItemVotes, Project, VoteTally, VoteTallyDelta
from labeling.rows import chunks
from labeling.selectors.votes import default_vote_version, items_votes_and_counted, vote_rows
from labeling.tally import Tally, items_votes, votes_tally

logger = logging.getLogger(__name__)

# Items counted per statement when many items change at once (an import, a rebuild).
CHUNK = 2000


def vote_tally_refresh(*, project: Project, item_ids: Iterable[int]) -> Tally:
    """Count the current votes of ``item_ids`` into their project's tally.

    Call it inside the transaction that changed the items' votes, while holding the project's
    label writes (shared) and the items' locks, after the change: it reads each item's votes,
    stores them and inserts the difference of their tally from the stored votes' as one
    :class:`~labeling.models.VoteTallyDelta` (none when nothing changed). Calling it again for
    an unchanged item writes no delta. A project not counted yet (no
    :class:`~labeling.models.VoteTally`: before its first fold) is left alone: that fold counts
    every item (so a first import pays nothing here).

    Returns:
        The difference written (empty when the votes did not change).

    Raises:
        TransactionManagementError: called outside a transaction.
    """
    if not transaction.get_connection().in_atomic_block:
        raise TransactionManagementError("vote_tally_refresh runs inside the writing transaction")
    ids = sorted(set(item_ids))
    change = Tally()
    for chunk in chunks(ids, CHUNK):
        rows, stored, counted = items_votes_and_counted(project=project, item_ids=chunk)
        if not counted:
            # Not counted yet: the first fold counts every item, this change included (its
            # count waits for this transaction, which holds the project's label writes).
            return Tally()
        fresh = items_votes(rows)
        changed = [i for i in chunk if fresh.get(i, []) != stored.get(i, [])]
        if not changed:
            continue
        for item_id in changed:
            change.add(votes_tally(fresh.get(item_id, [])))
            change.subtract(votes_tally(stored.get(item_id, [])))
        emptied = [i for i in changed if not fresh.get(i)]
        if emptied:
            ItemVotes.objects.filter(item_id__in=emptied).delete()
        ItemVotes.objects.bulk_create(
            [
                ItemVotes(item_id=i, project_id=project.pk, votes=fresh[i])
                for i in changed
                if fresh.get(i)
            ],
            update_conflicts=True,
            unique_fields=["item"],
            update_fields=["votes"],
        )
    change = change.clean()
    if change:
        VoteTallyDelta.objects.create(project_id=project.pk, counts=change.to_json())
    return change


def vote_tally_rebuild(*, project: Project) -> Tally:
    """Count every item of ``project`` from scratch: its items' votes, no delta, its tally.

    Holds the project's label writes (PostgreSQL's exclusive label-write lock; SQLite serialises
    writers) for the count, so no vote changes meanwhile: on a project of a million votes
    labelling waits for seconds. Used by the first fold of a project, when the version imported
    votes without one count under changed, and on a manager's request.
    """
    with transaction.atomic():
        project_label_writes_lock(project.pk, exclusive=True)
        ItemVotes.objects.filter(project=project).delete()
        VoteTallyDelta.objects.filter(project=project).delete()
        items = items_votes(vote_rows(project=project))
        ItemVotes.objects.bulk_create(
            [ItemVotes(item_id=i, project_id=project.pk, votes=v) for i, v in items.items()],
            batch_size=CHUNK,
        )
        tally = votes_tally(vote for votes in items.values() for vote in votes).clean()
        VoteTally.objects.update_or_create(
            project=project,
            defaults={
                "counts": tally.to_json(),
                "folded_at": timezone.now(),
                "default_version": default_vote_version(project),
            },
        )
    logger.info("vote_tally.rebuilt", extra={"project_id": project.pk, "items": len(items)})
    return tally


def vote_tally_fold(*, project: Project) -> Tally:
    """Add the project's deltas to its tally, delete them, and return the current tally.

    Rebuilds first (:func:`vote_tally_rebuild`) when the project has no tally yet or the
    version imported votes without one count under changed since the last count. The fold
    itself reads only the deltas: its cost is that of the changes since the last fold.

    Returns:
        The project's tally as of this fold (zero entries dropped).
    """
    stored = (
        VoteTally.objects.filter(project=project).values_list("default_version", flat=True).first()
    )
    if stored is None or stored != default_vote_version(project):
        return vote_tally_rebuild(project=project)
    with transaction.atomic():
        row = vote_tally_lock(project.pk)
        if row is None:  # dropped meanwhile (a manager's request): count from scratch
            return vote_tally_rebuild(project=project)
        tally = Tally.from_json(row.counts)
        deltas = list(
            VoteTallyDelta.objects.filter(project=project)
            .order_by("pk")
            .values_list("pk", "counts")
        )
        for _pk, counts in deltas:
            tally.add(Tally.from_json(counts))
        tally = tally.clean()
        if deltas:
            row.counts = tally.to_json()
            row.folded_at = timezone.now()
            row.save(update_fields=["counts", "folded_at"])
            VoteTallyDelta.objects.filter(pk__in=[pk for pk, _ in deltas]).delete()
    return tally


def vote_tally_invalidate(*, project: Project) -> None:
    """Drop the project's tally, so that the next fold counts every item from scratch."""
    VoteTally.objects.filter(project=project).delete()
