"""Bounds of the statistics' searches that inputs are checked against before any computation.

No NumPy, no SciPy: the web process's forms and API serializers read these limits, and must not
load the statistics with them.
"""

#: The largest number of additional calibration units a plan searches: a threshold that needs
#: more is reported as not certifiable within this budget (a search bound, not a statistic).
MAX_ADDITIONAL = 100_000
