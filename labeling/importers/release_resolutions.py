"""A release's resolutions checked against their record's votes, as comparison would write them.

A ``consensus`` resolution must be the agreement of its record's votes
(:func:`resolution_check`); ``consensus`` and ``adjudicated`` label every claim of the candidate.
"""

from __future__ import annotations

from typing import Any

from labeling.importers.record_errors import RecordError
from labeling.models import CANNOT_DECIDE
from labeling.vocabulary import ADJUDICATED, CONSENSUS, EVIDENCE_UNAVAILABLE


def _vote_key(label: Any, reason: Any) -> tuple[Any, Any]:
    """Return what the comparison compares: the label, and the reason only with that label.

    As ``labeling.selectors.vote_reads`` does: the reason counts only with ``evidence_unavailable``.
    """
    return (label, reason if label == EVIDENCE_UNAVAILABLE else None)


def resolution_check(line: dict[str, Any], at: str) -> None:
    """Check a resolution against the record's claims and annotations (a converted line).

    ``consensus`` and ``adjudicated`` label every claim of the candidate (adjudication and
    comparison both do). A ``consensus`` is what ``labeling.services.comparison`` writes when
    the votes agree, so it mirrors ``votes_compare``: the votes are the annotations with an
    answer label (at least one) made under the resolution's policy version (or under none);
    each has the resolution's answer label, and the same label for every claim, reasons
    counting only with ``evidence_unavailable``; ``cannot_decide`` and a claim a vote leaves
    unlabelled never agree. Evidence spans are not compared.

    Raises:
        RecordError: naming the first resolution or annotation field that breaks a rule.
    """
    resolution = line["resolution"]
    status = resolution["status"]
    if status not in (CONSENSUS, ADJUDICATED):
        return
    n_claims = len(line["claims"])
    resolved: dict[Any, tuple[Any, Any]] = {}
    for label in resolution["claim_labels"]:
        resolved.setdefault(label["claim"], _vote_key(label["label"], label["reason"]))
    missing = [k for k in range(n_claims) if k not in resolved]
    if missing:
        shown = ", ".join(str(k) for k in missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise RecordError(
            at,
            "resolution.claim_labels",
            f"a{'n' if status == ADJUDICATED else ''} {status} resolution labels every claim "
            f"of the candidate; no label for claim {shown}",
        )
    if status != CONSENSUS:
        return
    annotations = line["annotations"]
    # The votes compared are those made under the resolution's policy version: an item labelled
    # again under a new version keeps the earlier version's annotations beside them.
    # (When none is of that version, all are compared: the versions are checked later.)
    version = resolution.get("policy_version")
    labelled = [
        (a, annotation)
        for a, annotation in enumerate(annotations)
        if annotation["answer_label"] not in (None, "")
    ]
    votes = [
        (a, annotation)
        for a, annotation in labelled
        if version is None or annotation["policy_version"] in (None, version)
    ] or labelled
    if not votes:
        raise RecordError(
            at,
            "resolution.status",
            "a consensus resolution is the agreement of the record's annotations, but it has "
            + (
                "none"
                if not annotations
                else "no annotation with an answer label (only those are votes)"
            ),
        )
    agreed = _vote_key(resolution["answer_label"], resolution["answer_reason"])
    for a, annotation in votes:
        field = f"annotations[{a}]"
        label = annotation["answer_label"]
        if label == CANNOT_DECIDE:
            raise RecordError(
                at,
                f"{field}.answer_label",
                "cannot_decide never agrees, but the resolution is a consensus",
            )
        key = _vote_key(label, annotation["answer_reason"])
        if key[0] != agreed[0]:
            raise RecordError(
                at,
                f"{field}.answer_label",
                "differs from the answer_label of the consensus resolution (a consensus is "
                "the agreement of every vote)",
            )
        if key != agreed:
            raise RecordError(
                at,
                f"{field}.answer_reason",
                f"differs from the answer_reason of the consensus resolution (with "
                f"{EVIDENCE_UNAVAILABLE} the reason is part of the vote)",
            )
        given: dict[Any, tuple[int, dict[str, Any]]] = {}
        for q, claim_label in enumerate(annotation["claim_labels"]):
            given.setdefault(claim_label["claim"], (q, claim_label))
        for k in range(n_claims):
            if k not in given:
                raise RecordError(
                    at,
                    f"{field}.claim_labels",
                    f"no label for claim {k}, but the resolution is a consensus (every vote "
                    "labels every claim alike)",
                )
            q, claim_label = given[k]
            cfield = f"{field}.claim_labels[{q}]"
            if claim_label["label"] in (None, CANNOT_DECIDE):
                raise RecordError(
                    at,
                    f"{cfield}.label",
                    f"{CANNOT_DECIDE if claim_label['label'] else 'no label'} never agrees, "
                    "but the resolution is a consensus",
                )
            key = _vote_key(claim_label["label"], claim_label["reason"])
            if key[0] != resolved[k][0]:
                raise RecordError(
                    at,
                    f"{cfield}.label",
                    f"differs from the consensus resolution's label of claim {k} (a consensus "
                    "is the agreement of every vote)",
                )
            if key != resolved[k]:
                raise RecordError(
                    at,
                    f"{cfield}.reason",
                    f"differs from the consensus resolution's reason for claim {k} (with "
                    f"{EVIDENCE_UNAVAILABLE} the reason is part of the vote)",
                )
