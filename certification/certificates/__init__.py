"""Certificates: a calibration run's result as a pure function of its contract and inputs.

No Django, no database, no Celery: the package reads the spec's contract and the inputs
snapshot (JSON primitives) and calls :mod:`certification.stats`; ``tests/test_architecture.py``
imports every module of it in a fresh interpreter and checks that nothing of the web side loads.

The computation runs ``contract`` -> ``units`` -> the sections (``thresholds``, ``sets``,
``dependence``, ``rccs``, ``heldout``) -> ``ledger``, assembled by ``compute``.

:func:`calibration_result_compute` is loaded on first use: the web process imports this package
for the contract and the numbers, and must not load NumPy and SciPy with it
(``tests/test_light_web.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from certification.certificates.contract import Contract
from certification.certificates.jsonnum import from_num, num
from certification.certificates.version import STATS_VERSION

if TYPE_CHECKING:
    from certification.certificates.compute import calibration_result_compute


def __getattr__(name: str) -> Any:
    """Load :func:`calibration_result_compute` (and the statistics) on first use."""
    if name == "calibration_result_compute":
        from certification.certificates.compute import calibration_result_compute

        return calibration_result_compute
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["STATS_VERSION", "Contract", "calibration_result_compute", "from_num", "num"]
