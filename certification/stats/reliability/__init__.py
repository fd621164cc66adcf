"""Per-annotator reliability: rates against references, near-silence, Dawid–Skene estimates.

The Dawid–Skene model (1979) is fitted by EM as crowd-kit fits it; every public name of
``rates``, ``silence`` and ``latent_class`` is importable from here.
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
