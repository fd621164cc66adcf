"""Inter-annotator agreement on nominal labels: Krippendorff's alpha, Cohen's and Fleiss' kappa.

Shapes. A *ratings* matrix is n_units × n_raters, ``Sequence[Sequence[Label | None]]``, with
``None`` for "this rater did not rate this unit" (missing). A label is any hashable value
(certlabel passes strings such as ``"supported"`` or ``"evidence_unavailable:not_found"``); labels
are nominal, so their order and spelling never matter, only equality. Raters are identified by
strings.

Undefined values. A statistic that is undefined on the data (no variation, too few units) is
reported as a :class:`Statistic` whose ``value`` is None and whose ``reason`` says why — never 0,
1 or NaN. Degeneracy is decided on integer counts, exactly (an expected
agreement of 1 is ``n**2 == sum(row_i * col_i)``), so no floating-point tolerance is needed.
Invalid *input* (a ragged matrix, a negative count) raises :class:`StatsError`.

What is computed:

- :func:`krippendorff_alpha_nominal`: Krippendorff's alpha, nominal metric, missing values
  allowed, via the ``krippendorff`` package. Units with fewer than two ratings drop out.
- :func:`cohen_kappa`: Cohen's (1960) kappa of a k × k contingency table of two raters, with the
  large-sample standard error of Fleiss, Cohen and Everitt (1969) and a Wald interval; the same
  numbers as ``statsmodels.stats.inter_rater.cohens_kappa`` (reimplemented here on numpy so that
  statsmodels stays a test-only dependency). :func:`cohen_kappa_labels` builds the table from two
  label sequences over the units both raters rated.
- :func:`fleiss_kappa`: Fleiss' (1971) kappa of a units × categories count table with the same
  number of ratings per unit (``statsmodels.stats.inter_rater.fleiss_kappa(method="fleiss")``).
- :func:`percent_agreement`: the proportion of agreeing rater pairs, see its docstring.
- :func:`pairwise_cohen_kappa` and :func:`agreement_summary`: everything above for one label level.
- :class:`LevelCounts` and :func:`agreement_summary_from_counts`: the same figures from additive
  per-unit counts, so a caller can keep them current rating by rating.

Sources: Krippendorff, K. (2011), "Computing Krippendorff's Alpha-Reliability", Annenberg School
for Communication, https://repository.upenn.edu/asc_papers/43 ; Cohen, J. (1960), "A coefficient
of agreement for nominal scales", Educational and Psychological Measurement 20(1), 37–46;
Fleiss, J. L., Cohen, J. and Everitt, B. S. (1969), "Large sample standard errors of kappa and
weighted kappa", Psychological Bulletin 72(5), 323–327; Fleiss, J. L. (1971), "Measuring nominal
scale agreement among many raters", Psychological Bulletin 76(5), 378–382.

Modules: :mod:`~certification.stats.agreement.results` (reasons and result types),
:mod:`~certification.stats.agreement.encoding` (input checks and label coding),
:mod:`~certification.stats.agreement.cohen`, :mod:`~certification.stats.agreement.multi_rater`
(Krippendorff, percent agreement, Fleiss) and :mod:`~certification.stats.agreement.summary` (per
pair and per level). Every public name is importable from ``certification.stats.agreement``.
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
