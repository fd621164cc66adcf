"""Per-annotator reliability: rates against references, near-silence, Dawid–Skene estimates.

Modules: :mod:`~certification.stats.reliability.rates` (accuracy, confusion matrix, per-label
rates and kappa against reference labels; the share of labels on disputed units),
:mod:`~certification.stats.reliability.silence` (the near-silent rule) and
:mod:`~certification.stats.reliability.latent_class` (Dawid and Skene's 1979 latent-class model,
fitted by EM as crowd-kit fits it). Every public name is importable from
``certification.stats.reliability``.
"""

from certification.stats.reliability.latent_class import (
    ASSUMPTIONS,
    DAWID_SKENE_MAX_ITER,
    DAWID_SKENE_TOL,
    NO_LABEL,
    NOT_IDENTIFIED,
    DawidSkeneEstimate,
    DawidSkeneUndefined,
    dawid_skene,
)
from certification.stats.reliability.rates import (
    NO_TRIALS,
    RaterAccuracy,
    accuracy_against,
    dispute_rates,
    rate,
)
from certification.stats.reliability.silence import (
    NEAR_SILENT_MIN_LABELS,
    NEAR_SILENT_RATIO,
    Silence,
    default_label,
    near_silence,
)

__all__ = [
    "ASSUMPTIONS",
    "DAWID_SKENE_MAX_ITER",
    "DAWID_SKENE_TOL",
    "NEAR_SILENT_MIN_LABELS",
    "NEAR_SILENT_RATIO",
    "NOT_IDENTIFIED",
    "NO_TRIALS",
    "NO_LABEL",
    "DawidSkeneEstimate",
    "DawidSkeneUndefined",
    "RaterAccuracy",
    "Silence",
    "accuracy_against",
    "dawid_skene",
    "default_label",
    "dispute_rates",
    "near_silence",
    "rate",
]
