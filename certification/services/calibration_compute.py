"""Moved to :mod:`certification.certificates` (pure, no Django); this name stays importable.

Only ``certification.plots`` still imports from here (``from_num``); once it imports from
:mod:`certification.certificates`, this module can go.
"""

from certification.certificates import STATS_VERSION, calibration_result_compute, from_num, num

__all__ = ["STATS_VERSION", "calibration_result_compute", "from_num", "num"]
