"""FaithBench from ../shared/data: imported prior annotations that disagree reach the queue."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pysbd
import pytest
from django.core.management import call_command

from labeling.importers.claims import split_sentences
from labeling.models import Project
from labeling.selectors.adjudication import disagreement_queue
from labeling.selectors.review import project_progress
from tests.factories import start_labelling

pytestmark = [pytest.mark.django_db, pytest.mark.shared_data]

BATCHES = range(1, 9)


def batch_path(shared_data: Path, batch: int) -> Path:
    return shared_data / "faithbench" / "data_for_release" / f"batch_{batch}.json"


def _touches(span: tuple[int, int], claim: tuple[int, int]) -> bool:
    (s, e), (cs, ce) = span, claim
    return cs <= s < ce if s == e else max(s, cs) < min(e, ce)


def disagreeing_samples(shared_data: Path) -> set[str]:
    """Candidate keys whose batch annotators' labels differ, computed from the raw files.

    Written from the mapping declared in the FaithBench policy guideline, not from the
    comparison service: per annotator of the batch, the answer is inadmissible iff one of their
    spans carries an Unwanted* label; a claim (a sentence of the importer's split) is
    contradicted if one of their labelled spans touching it says Unwanted.Intrinsic,
    not_supported if another labelled span touches it, else supported. A sample is disputed
    when two annotators' (answer, claim labels) differ.
    """
    segmenter = pysbd.Segmenter(language="en", clean=False, char_span=True)
    disputed = set()
    for batch in BATCHES:
        samples = json.loads(batch_path(shared_data, batch).read_text("utf-8"))["samples"]
        annotators = {a["annotator_id"] for s in samples for a in s["annotations"]}
        for sample in samples:
            sentences, _ = split_sentences(sample["summary"], segmenter)
            votes = set()
            for annotator in annotators:
                own = [a for a in sample["annotations"] if a["annotator_id"] == annotator]
                answer = any(label.startswith("Unwanted") for a in own for label in a["label"])
                claims = []
                for sentence in sentences:
                    hits = [
                        a["label"]
                        for a in own
                        if a["label"] and _touches((a["summary_start"], a["summary_end"]), sentence)
                    ]
                    if not hits:
                        claims.append("supported")
                    elif any("Unwanted.Intrinsic" in labels for labels in hits):
                        claims.append("contradicted")
                    else:
                        claims.append("not_supported")
                votes.add((answer, tuple(claims)))
            if len(votes) > 1:
                disputed.add(f"b{batch}-s{sample['sample_id']}")
    return disputed


def test_faithbench_items_whose_annotators_disagree_fill_the_queue(shared_data):
    # given the 8 release batches imported into one project
    call_command(
        "import_workload",
        *(batch_path(shared_data, b) for b in BATCHES),
        "--project",
        "fb",
        "--create",
        "--format",
        "faithbench",
        "--no-progress",
        stdout=io.StringIO(),
    )
    project = Project.objects.get(slug="fb")
    # when labelling starts with overlap 2 (every batch has 2 or 3 annotators: all compared)
    start_labelling(project)
    # then exactly the samples whose annotators' labels differ wait for adjudication
    expected = disagreeing_samples(shared_data)
    queue = list(disagreement_queue(project=project, filters={}))
    assert len(expected) > 0
    assert len(queue) == len(expected)
    assert {item.candidate.key for item in queue} == expected
    # and every other item is resolved by consensus of its prior annotators
    progress = project_progress(project=project)
    assert progress.total == 400
    assert progress.awaiting_adjudication == len(expected)
    assert progress.resolved_consensus == 400 - len(expected)
    print(f"FaithBench disagreement queue: {len(queue)} of 400 items")  # noqa: T201
