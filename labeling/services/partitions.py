"""Grouped partition of a project's questions into dev / calibration / test, group by group.

Questions that share a source document (through any version) or a non-empty ``group_key`` are
in one connected component (union-find); whole components go to one partition, so no group is
split. Components are shuffled with a recorded seed and dealt greedily to the partition whose
question count is furthest below its declared proportion. The split is frozen before any label.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from labeling.exceptions import InvalidInput, InvalidTransition, PermissionDenied
from labeling.locks import project_lock
from labeling.models import Partition, Project, Question, RetrievalLink
from labeling.permissions import MANAGERS, require_role

PARTITION_ORDER: tuple[str, ...] = tuple(Partition.values)
UPDATE_CHUNK = 5000


@dataclass(frozen=True)
class PartitionResult:
    """The frozen split: seed, declared proportions, and questions/components per partition."""

    seed: int
    proportions: dict[str, float]
    questions: dict[str, int]
    components: dict[str, int]


class UnionFind:
    """Disjoint sets over hashable elements, with path halving and union by size."""

    def __init__(self) -> None:
        self.parent: dict[Hashable, Hashable] = {}
        self.size: dict[Hashable, int] = {}

    def add(self, x: Hashable) -> None:
        """Add ``x`` as a singleton if it is new."""
        if x not in self.parent:
            self.parent[x] = x
            self.size[x] = 1

    def find(self, x: Hashable) -> Hashable:
        """Return the representative of ``x``'s set."""
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: Hashable, b: Hashable) -> None:
        """Merge the sets of ``a`` and ``b``."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]


def grouped_components(
    questions: Iterable[int], links: Iterable[tuple[int, Hashable]]
) -> list[list[int]]:
    """Return the connected components of questions joined through shared group tokens.

    Args:
        questions: question ids.
        links: ``(question id, token)`` pairs; two questions with a common token are joined.
            Tokens are e.g. ``("doc", document_id)`` or ``("group", group_key)``.

    Returns:
        Components as sorted lists of question ids, ordered by their smallest id.
    """
    uf = UnionFind()
    for q in questions:
        uf.add(("q", q))
    for q, token in links:
        uf.add(("t", token))
        uf.union(("q", q), ("t", token))
    members: dict[Hashable, list[int]] = defaultdict(list)
    for node in uf.parent:
        if node[0] == "q":  # type: ignore[index]
            members[uf.find(node)].append(node[1])  # type: ignore[index]
    return sorted((sorted(m) for m in members.values()), key=lambda m: m[0])


def deal_components(
    components: list[list[int]], proportions: Mapping[str, float], seed: int
) -> dict[str, list[int]]:
    """Shuffle components with ``seed`` and deal each to the partition furthest below target.

    The target of partition p is ``proportions[p] * n`` questions; a component goes to the
    partition with the largest ``target - assigned`` (ties: dev, calibration, test order).
    Partitions with proportion 0 receive nothing.
    """
    order = list(range(len(components)))
    random.Random(seed).shuffle(order)
    total = sum(len(c) for c in components)
    assigned: dict[str, list[int]] = {p: [] for p in PARTITION_ORDER}
    active = [p for p in PARTITION_ORDER if proportions.get(p, 0) > 0]
    for i in order:
        best = max(
            active,
            key=lambda p: (proportions[p] * total - len(assigned[p]), -PARTITION_ORDER.index(p)),
        )
        assigned[best].extend(components[i])
    return assigned


def _check_proportions(proportions: Mapping[str, float]) -> dict[str, float]:
    unknown = set(proportions) - set(PARTITION_ORDER)
    if unknown:
        raise InvalidInput(f"unknown partition(s) {sorted(unknown)}; use {list(PARTITION_ORDER)}")
    if any(not 0 <= v <= 1 for v in proportions.values()):
        raise InvalidInput("each proportion must be in [0, 1]")
    if abs(sum(proportions.values()) - 1) > 1e-9:
        raise InvalidInput(f"proportions must sum to 1, not {sum(proportions.values())}")
    return {p: float(proportions.get(p, 0.0)) for p in PARTITION_ORDER}


@transaction.atomic
def partition_freeze(
    *,
    project: Project,
    proportions: Mapping[str, float],
    seed: int,
    actor: AbstractBaseUser | None = None,
) -> PartitionResult:
    """Assign every question of ``project`` to dev / calibration / test and freeze the split.

    ``actor`` is a manager of the project, or None from the command line.

    Raises:
        NotFound: ``actor`` is not a member of the project.
        PermissionDenied: ``actor`` is not a manager of the project.
        InvalidInput: proportions are not a distribution over the three partitions, or the
            project has no questions.
        InvalidTransition: the split is already frozen, or labelling has started (a frozen
            label policy).

    Concurrency: opens its own transaction and locks the Project row.
    """
    require_role(
        project=project,
        actor=actor,
        roles=MANAGERS,
        action="freeze the partition",
        outsider=PermissionDenied,
    )
    clean = _check_proportions(proportions)
    given, project = project, project_lock(project.pk)
    if project.partition_frozen_at is not None:
        frozen = f"{project.partition_frozen_at:%Y-%m-%d %H:%M} UTC"
        raise InvalidTransition(f"the partition of {project.slug!r} was frozen at {frozen}")
    if project.policies.filter(frozen_at__isnull=False).exists():
        raise InvalidTransition(
            "labelling has started; the partition must be frozen before any label"
        )
    question_ids = list(Question.objects.filter(project=project).values_list("pk", flat=True))
    if not question_ids:
        raise InvalidInput(f"project {project.slug!r} has no questions to partition")
    links: list[tuple[int, Hashable]] = [
        (q, ("doc", d))
        for q, d in RetrievalLink.objects.filter(question__project=project).values_list(
            "question_id", "source_version__document_id"
        )
    ]
    links += [
        (q, ("group", g))
        for q, g in Question.objects.filter(project=project)
        .exclude(group_key="")
        .values_list("pk", "group_key")
    ]
    components = grouped_components(question_ids, links)
    dealt = deal_components(components, clean, seed)
    for partition, ids in dealt.items():
        for i in range(0, len(ids), UPDATE_CHUNK):
            Question.objects.filter(pk__in=ids[i : i + UPDATE_CHUNK]).update(partition=partition)
    component_of = {q: n for n, comp in enumerate(components) for q in comp}
    project.partition_seed = seed
    project.partition_proportions = clean
    project.partition_frozen_at = timezone.now()
    project.save(update_fields=["partition_seed", "partition_proportions", "partition_frozen_at"])
    given.refresh_from_db(fields=["partition_seed", "partition_proportions", "partition_frozen_at"])
    return PartitionResult(
        seed=seed,
        proportions=clean,
        questions={p: len(ids) for p, ids in dealt.items()},
        components={p: len({component_of[q] for q in ids}) for p, ids in dealt.items()},
    )
