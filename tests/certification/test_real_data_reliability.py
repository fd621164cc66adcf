"""Per-person reliability on the shared FaithBench data (vectara/FaithBench batches 1-8).

Imported and resolved as in ``test_real_data_calibration`` (consensus where the batch's
annotators agree, the worst-label rule on the disagreements). Batch 7's "New User" flagged one
span in 50 summaries: near-silent at both label levels, and left out of the second alpha. The
Dawid–Skene fit is the same whatever the order of the votes (seeded shuffles) and equals the EM
written from Dawid and Skene (1979) in the stats tests.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from certification.services import reliability_recompute
from certification.stats.reliability import dawid_skene
from labeling.importers.faithbench import pseudonym
from labeling.selectors import project_votes
from tests.certification.stats.test_reliability import _em
from tests.certification.test_real_data_calibration import _faithbench

pytestmark = [pytest.mark.django_db, pytest.mark.shared_data]


def _annotator(shared_data, batch, name):
    samples = json.loads(
        (shared_data / "faithbench" / "data_for_release" / f"batch_{batch}.json").read_text()
    )["samples"]
    ids = {
        a["annotator_id"] for s in samples for a in s["annotations"] if a["annotator_name"] == name
    }
    (annotator_id,) = ids
    return f"prior:{pseudonym(annotator_id)}"


def test_faithbench_near_silent_annotator_flagged_and_model_stable(shared_data):
    project, _ = _faithbench(shared_data)
    report = reliability_recompute(project_id=project.pk)
    result = report.result
    quiet = _annotator(shared_data, 7, "New User")
    people = {p["rater"]: p for p in result["people"]}
    assert len(people) == 22  # annotator ids are per batch: 2+3+3+3+3+2+3+3
    silent = {r for r, p in people.items() if p["flags"]["near_silent"]}
    assert silent == {quiet}
    person = people[quiet]
    assert person["flags"]["near_silent"] == ["answer", "claim"]
    answer = person["levels"]["answer"]["silence"]
    # 1 inadmissible answer of 50, against 34 of the other two batch-7 annotators' 100
    assert (answer["flags"]["numerator"], answer["flags"]["denominator"]) == (1, 50)
    assert answer["others_rate"] == pytest.approx(0.34)
    assert answer["default_label"] == "admissible"
    # Manveer flags 9 of 50 answers in batch 7 (many Benign spans): not near-silent
    manveer = people[_annotator(shared_data, 7, "Manveer")]
    assert manveer["levels"]["answer"]["silence"]["flags"]["numerator"] == 9
    assert not manveer["flags"]["near_silent"]
    # alpha side by side: the flagged people are left out of the second figure only
    for level in ("answer", "claim"):
        alpha = result["alpha"][level]
        assert quiet in alpha["left_out"]
        assert alpha["all"]["value"] is not None and alpha["without_flagged"]["value"] is not None
    assert round(result["alpha"]["answer"]["all"]["value"], 3) == 0.486

    # the model: one fit per level, stable under seeded shuffles of units and raters
    votes = project_votes(project=project)
    for matrix in votes.levels():
        ratings = [list(r) for r in matrix.ratings]
        base = dawid_skene(ratings, matrix.raters, matrix.units)
        stored = result["dawid_skene"][matrix.level]
        assert stored["labels"] == list(base.labels) and stored["converged"]
        for seed in (1, 2, 3):
            rng = random.Random(seed)
            rows, cols = list(range(len(ratings))), list(range(len(matrix.raters)))
            rng.shuffle(rows)
            rng.shuffle(cols)
            fit = dawid_skene(
                [[ratings[i][c] for c in cols] for i in rows],
                [matrix.raters[c] for c in cols],
                [matrix.units[i] for i in rows],
            )
            by_unit = dict(zip(fit.units, fit.posteriors, strict=True))
            got = np.array([by_unit[u] for u in base.units])
            assert np.allclose(got, np.asarray(base.posteriors), atol=1e-8)
            assert fit.iterations == base.iterations
        # the EM written from the paper, run for the same number of iterations
        _, posteriors, prior, _ = _em(ratings, matrix.raters, iterations=base.iterations)
        assert np.allclose(np.asarray(base.posteriors), posteriors, atol=1e-6)
        assert np.allclose(base.priors, prior, atol=1e-6)
        # at the fixed point: 1,000 more iterations move no most probable label and no
        # posterior by more than 1e-3 (measured: 3e-5 for answers after 442 iterations, 3e-4
        # for claims after 1,181; after 2 iterations, where the former stopping rule ended,
        # posteriors were up to 0.77 / 0.95 away and 2 of 400 / 24 of 1,516 most probable
        # labels still to change)
        _, settled, _, _ = _em(ratings, matrix.raters, iterations=base.iterations + 1000)
        assert base.converged and base.change < base.tol
        assert np.max(np.abs(np.asarray(base.posteriors) - settled)) < 1e-3
        assert (np.asarray(base.posteriors).argmax(axis=1) == settled.argmax(axis=1)).all()
        # the model reads the near-silent annotator as almost never saying what others flag
        column = base.raters.index(quiet)
        default = base.labels.index(answer["default_label"]) if matrix.level == "answer" else None
        if default is not None:
            flagged = 1 - default
            assert base.confusion[column][flagged][flagged] < 0.1
