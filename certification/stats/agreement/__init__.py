"""Inter-annotator agreement on nominal labels: Krippendorff's alpha, Cohen's and Fleiss' kappa.

A *ratings* matrix is n_units × n_raters, ``Sequence[Sequence[Label | None]]``, ``None`` for
missing; labels are any hashable value compared by equality only; raters are strings. A statistic
undefined on the data (no variation, too few units) is a :class:`Statistic` with ``value`` None
and a ``reason``, never 0, 1 or NaN; degeneracy is decided exactly on integer counts. Invalid
input raises :class:`StatsError`.

Krippendorff's alpha (nominal, missing values allowed, via the ``krippendorff`` package); Cohen's
kappa with the Fleiss–Cohen–Everitt large-sample standard error and a Wald interval (the numbers
of ``statsmodels.stats.inter_rater.cohens_kappa``, reimplemented so statsmodels stays test-only);
Fleiss' kappa for an equal number of ratings per unit (``fleiss_kappa(method="fleiss")``);
percent agreement. :class:`LevelCounts` gives the same figures from additive per-unit counts.

Sources: Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability",
https://repository.upenn.edu/asc_papers/43 ; Cohen (1960), Educational and Psychological
Measurement 20(1); Fleiss, Cohen and Everitt (1969), Psychological Bulletin 72(5); Fleiss (1971),
Psychological Bulletin 76(5).
"""

from certification.stats.agreement.cohen import (
    ALL_AGREE,
    NO_COMMON_LABEL,
    SINGLE_LABEL,
    cohen_kappa,
    cohen_kappa_labels,
    contingency_table,
)
from certification.stats.agreement.counts import (
    SCALE_KINDS,
    LabelScale,
    LevelCounts,
    agreement_summary_from_counts,
    krippendorff_alpha_from_counts,
    off_scale,
)
from certification.stats.agreement.encoding import encode_ratings
from certification.stats.agreement.multi_rater import (
    fleiss_kappa,
    fleiss_kappa_ratings,
    krippendorff_alpha_nominal,
    percent_agreement,
)
from certification.stats.agreement.results import (
    FEWER_THAN_TWO_RATERS,
    FEWER_THAN_TWO_RATINGS_PER_UNIT,
    FEWER_THAN_TWO_SHARED_UNITS,
    FEWER_THAN_TWO_UNITS,
    NO_PAIRABLE_UNIT,
    NO_SHARED_UNIT,
    NO_VARIATION,
    UNEQUAL_RATINGS_PER_UNIT,
    AgreementSummary,
    CohenKappa,
    EncodedRatings,
    Label,
    PairKappa,
    PairwiseKappa,
    Statistic,
)
from certification.stats.agreement.summary import agreement_summary, pairwise_cohen_kappa

__all__ = [
    "SCALE_KINDS",
    "LabelScale",
    "krippendorff_alpha_from_counts",
    "off_scale",
    "ALL_AGREE",
    "FEWER_THAN_TWO_RATERS",
    "NO_COMMON_LABEL",
    "NO_SHARED_UNIT",
    "SINGLE_LABEL",
    "PairwiseKappa",
    "LevelCounts",
    "agreement_summary_from_counts",
    "FEWER_THAN_TWO_SHARED_UNITS",
    "FEWER_THAN_TWO_RATINGS_PER_UNIT",
    "FEWER_THAN_TWO_UNITS",
    "NO_PAIRABLE_UNIT",
    "NO_VARIATION",
    "UNEQUAL_RATINGS_PER_UNIT",
    "AgreementSummary",
    "CohenKappa",
    "EncodedRatings",
    "PairKappa",
    "Statistic",
    "agreement_summary",
    "cohen_kappa",
    "cohen_kappa_labels",
    "contingency_table",
    "encode_ratings",
    "fleiss_kappa",
    "fleiss_kappa_ratings",
    "krippendorff_alpha_nominal",
    "pairwise_cohen_kappa",
    "percent_agreement",
    "Label",
]
