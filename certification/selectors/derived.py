"""Freshness of a project's derived results: what each rests on and what waits."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Max

from certification.models import DerivedResultState
from labeling import engine
from labeling.models import DerivedChange, DerivedKind, Project


@dataclass(frozen=True)
class Freshness:
    """What a derived result rests on and whether newer changes wait (see the selector)."""

    kind: str
    covered_generation: int
    generation: int
    newer_changes: int
    computed_at: datetime | None
    queued: bool
    running: bool
    last_error: str
    worker_lost: bool = False

    @property
    def current(self) -> bool:
        """No change is waiting and no computation is running."""
        return self.newer_changes == 0 and not self.running

    def as_json(self) -> dict[str, Any]:
        """Return the freshness as JSON primitives (the API's ``freshness`` object)."""
        return {
            "kind": self.kind,
            "current": self.current,
            "covered_generation": self.covered_generation,
            "generation": self.generation,
            "newer_changes": self.newer_changes,
            "computed_at": self.computed_at.isoformat() if self.computed_at else None,
            "queued": self.queued,
            "running": self.running,
            "worker_lost": self.worker_lost,
            "last_error": self.last_error or None,
        }


def derived_freshness(*, project: Project) -> dict[str, Freshness]:
    """Return the freshness of each kind of the project's derived results, by kind.

    ``covered_generation`` is the largest change id the stored result covered (0 before the
    first computation), ``newer_changes`` the changes committed since that it does not cover
    (the change rows left), ``generation`` the largest change id known; one
    :class:`Freshness` per :class:`~labeling.models.DerivedKind` value.
    """
    pending = {
        row["kind"]: (row["n"], row["top"])
        for row in DerivedChange.objects.filter(project=project)
        .values("kind")
        .annotate(n=Count("pk"), top=Max("pk"))
        .order_by("kind")
    }
    states = {s.kind: s for s in DerivedResultState.objects.filter(project=project)}
    result = {}
    for kind in DerivedKind.values:
        state = states.get(kind)
        n, top = pending.get(kind, (0, 0))
        covered = state.covered_generation if state else 0
        result[kind] = Freshness(
            kind=kind,
            covered_generation=covered,
            generation=max(covered, top or 0),
            newer_changes=n,
            computed_at=state.computed_at if state else None,
            queued=bool(state and state.enqueued_at),
            running=bool(state and state.lease_owner),
            last_error=state.last_error if state else "",
            worker_lost=bool(state and state.lease_owner and engine.is_lapsed(state)),
        )
    return result
