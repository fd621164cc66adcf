"""Adapter for the faithbench dataset (being written)."""

from labeling.importers import PolicyTemplate, RecordSource, WorkloadFormat


def _open(stream, filename):  # pragma: no cover - replaced by the adapter
    raise NotImplementedError


FORMAT = WorkloadFormat("faithbench", "faithbench", _open, PolicyTemplate(""))
