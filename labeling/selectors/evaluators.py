"""Reads of a project's evaluators (automated judges whose labels were imported)."""

from __future__ import annotations

from django.db.models import Count, QuerySet

from labeling.models import Evaluator, Project


def evaluator_list(*, project: Project) -> QuerySet[Evaluator]:
    """Return the evaluators by name, then version, with ``label_count`` (all labels). One query."""
    return (
        Evaluator.objects.filter(project=project)
        .annotate(label_count=Count("labels"))
        .order_by("name", "version", "pk")
    )
