"""The calibration contract as canonical JSON: what a spec's content hash covers.

Shared by the services (which hash specs and runs) and the selectors (which show the contract);
no queries, no side effects.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from certification.certificates.contract import loss_content
from certification.certificates.version import STATS_VERSION

#: The contract's fields, in the order forms and the API list them (name and version aside).
SPEC_FIELDS = (
    "description",
    "method",
    "loss",
    "denominator",
    "alpha",
    "delta",
    "thresholds",
    "acceptance",
    "score_field",
    "selector",
    "utility",
    "multiplicity",
    "canonicaliser",
    "tie_rule",
    "answer_field",
    "stopping_delta",
    "partition",
    "unresolved_as",
    "evidence_unavailable_as",
    "abstained_as",
    "pending_as",
    "report_confidence",
    "seed",
)


def decimal_text(value: Decimal) -> str:
    """The shortest plain decimal string of ``value`` (``Decimal("0.10000000")`` -> ``"0.1"``)."""
    return f"{value.normalize():f}"


def spec_content(spec: Any) -> dict[str, Any]:
    """Return a spec's contract (a model instance or a mapping) as canonical JSON primitives.

    Decimals are written as their shortest plain decimal string (``"0.1"``), thresholds as
    floats in the declared order, the loss as :func:`loss_content`. The name, version, links
    and authorship are not included.
    """
    content: dict[str, Any] = {}
    for key in SPEC_FIELDS:
        value = spec[key] if isinstance(spec, Mapping) else getattr(spec, key)
        if key == "loss" and not isinstance(spec, Mapping):
            value = loss_content(spec.loss, spec.loss_field)
        if isinstance(value, Decimal):
            value = decimal_text(value)
        elif key == "thresholds":
            value = [float(t) for t in value]
        content[key] = value
    return content


def canonical_json(value: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8 kept, NaN and infinity refused."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def spec_sha256(spec: Any) -> str:
    """Return the sha256 of the canonical JSON of :func:`spec_content`."""
    return hashlib.sha256(canonical_json(spec_content(spec)).encode("utf-8")).hexdigest()


def inputs_sha256(*, spec_sha: str, inputs: Mapping[str, Any]) -> str:
    """The run's input hash: the spec's content hash, the statistics' version and the snapshot."""
    payload = {"spec_sha256": spec_sha, "stats_version": STATS_VERSION, "inputs": inputs}
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()
