"""The RCCS report of a project: computed on request from the current resolved labels.

RCCS is one query over the project's candidate answers (their retrieval score R, confidence C
and current resolved answer label) and a linear pass over them, so it is computed per request
rather than stored as a derived result: it is always current, with nothing to mark stale.
"""

from __future__ import annotations

from typing import Any

from certification.exceptions import RCCSNotAvailable
from labeling import vocabulary
from labeling.models import CandidateAnswer, ItemStatus, Project, ResolutionStatus

#: The partitions a report may be restricted to (``None``: every candidate of the project).
RCCS_PARTITIONS = ("dev", "calibration", "test")


def _outcome(status: str, resolution_status: str | None, answer_label: str | None) -> str:
    if status != ItemStatus.RESOLVED or resolution_status is None:
        return vocabulary.PENDING
    if resolution_status == ResolutionStatus.UNRESOLVED:
        return vocabulary.UNRESOLVED
    return answer_label or vocabulary.UNRESOLVED


def rccs_report_get(*, project: Project, partition: str | None = None) -> dict[str, Any]:
    """Return the project's RCCS report over its candidate answers (one partition or all).

    ``partition`` None means every candidate. Returns ``partition`` and
    :func:`certification.certificates.rccs.rccs_report`'s ``counts``, ``rccs`` and
    ``correctness``. One query.

    Raises:
        RCCSNotAvailable: no candidate answer of the project (in the partition) has both a
            retrieval score and a confidence (HTTP 404 in the API).
    """
    # The statistics (NumPy) load with the first report, not with the web process.
    from certification.certificates.rccs import rccs_report

    # gold items are references for checking annotators, never certification inputs
    candidates = CandidateAnswer.objects.filter(question__project=project).exclude(
        item__status=ItemStatus.GOLD
    )
    if partition is not None:
        candidates = candidates.filter(question__partition=partition)
    rows = [
        {"R": r, "C": c, "outcome": _outcome(status, resolution_status, label)}
        for r, c, status, resolution_status, label in candidates.order_by("pk").values_list(
            "retrieval_score",
            "confidence",
            "item__status",
            "item__resolution__status",
            "item__resolution__answer_label",
        )
    ]
    report = rccs_report(rows)
    if report["counts"]["with_both"] == 0:
        where = f" in the {partition} partition" if partition else ""
        raise RCCSNotAvailable(
            f"no RCCS: no candidate answer{where} has both a retrieval score and a confidence "
            f"({report['counts']['candidates']} candidates, {report['counts']['with_retrieval']}"
            f" with a retrieval score, {report['counts']['with_confidence']} with a confidence)"
        )
    return {"partition": partition, **report}
