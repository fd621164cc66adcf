"""Active sampling on FaithBench (batches 1-8, 400 summaries): what the uncertainty rule saves.

Human error (positive) = any annotator flagged an ``Unwanted`` span (the worst-label rule of the
audit tests). The judge is an HHEM detector, its predicted error probability 1 - score. The
labels a uniform design would need are estimated from each active sample by IPW; the reference
is the same quantity computed from all 400 labels, N sum e^2 / sum(e^2 / pi), e = Y - f, and the
simulated spread of the uniform design at that many labels.

Measured (budget 100 of 400, floor 0.2): the saving is negative, -12.9% for hhem-2.1, -27.5% for
hhem-2.1-english, -51.2% for hhemv1: the data was chosen where detectors disagree with people,
so HHEM's confident scores are often wrong and sampling by its uncertainty costs labels. The page
reports that honestly rather than assuming a gain.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from certification.stats.ppi import (
    active_inclusion_probabilities,
    active_ppi_mean,
    judge_uncertainty,
)

pytestmark = pytest.mark.shared_data

BUDGET = 100


@pytest.fixture
def faithbench(shared_data):
    folder = shared_data / "faithbench" / "data_for_release"
    if not folder.is_dir():
        pytest.skip("FaithBench is not in the shared data")
    errors, scores = [], {"hhem-2.1": [], "hhem-2.1-english": [], "hhemv1": []}
    for batch in range(1, 9):
        for sample in json.loads((folder / f"batch_{batch}.json").read_text())["samples"]:
            flagged = (a["label"] for a in sample["annotations"])
            errors.append(any(any(x.startswith("Unwanted") for x in labels) for labels in flagged))
            for name, values in scores.items():
                values.append(sample["metadata"][name])
    return np.array(errors, dtype=float), {k: 1 - np.array(v) for k, v in scores.items()}


@pytest.mark.parametrize(
    ("detector", "saving"),
    [("hhem-2.1", -0.1287), ("hhem-2.1-english", -0.2749), ("hhemv1", -0.5123)],
)
def test_the_estimated_saving_matches_the_full_data(faithbench, detector, saving):
    y, predictions = faithbench
    f = predictions[detector]
    pi = active_inclusion_probabilities(judge_uncertainty(f), budget=BUDGET)
    residual = (y - f) ** 2
    needed = y.size * residual.sum() / (residual / pi).sum()
    # the reference from all 400 labels
    assert 1 - BUDGET / needed == pytest.approx(saving, abs=5e-5)
    # each sample's IPW estimate, averaged over 1,000 seeded draws, is close to it
    rng = np.random.default_rng(400)
    estimated = []
    for _ in range(1000):
        idx = np.flatnonzero(rng.random(y.size) < pi)
        estimated.append(active_ppi_mean(f, pi, idx, y[idx]).saving)
    assert np.mean(estimated) == pytest.approx(saving, abs=0.04)


def test_a_uniform_design_with_the_needed_labels_has_the_same_spread(faithbench):
    y, predictions = faithbench
    f = predictions["hhem-2.1"]
    pi = active_inclusion_probabilities(judge_uncertainty(f), budget=BUDGET)
    residual = (y - f) ** 2
    rate = np.full(y.size, residual.sum() / (residual / pi).sum())
    rng = np.random.default_rng(8)

    def spread(design):
        draws = (np.flatnonzero(rng.random(y.size) < design) for _ in range(3000))
        return np.std([active_ppi_mean(f, design, idx, y[idx]).estimate for idx in draws])

    assert spread(rate) / spread(pi) == pytest.approx(1.0, abs=0.06)
