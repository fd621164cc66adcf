"""The parts of a calibration spec's contract that the certificate computation reads, typed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from labeling.vocabulary import ABSTAINED, EVIDENCE_UNAVAILABLE, PENDING, UNRESOLVED

#: The losses bounded in [0, 1] (the others are 0/1). The spec's ``loss`` column holds the
#: source; the contract states the object ``{"kind": "bounded", "source": ..., "field": ...}``.
BOUNDED_LOSS_SOURCES = ("unsupported_claim_share", "candidate_field")


def loss_content(loss: str, loss_field: str) -> str | dict[str, str]:
    """The contract's ``loss``: a 0/1 loss's name, or a bounded loss's object.

    ``loss`` is a name of ``certification.models.Loss``; ``loss_field`` the candidate field of a
    ``candidate_field`` loss. A 0/1 loss gives ``loss`` itself (so every binary spec's hash is
    unchanged), a bounded one ``{"kind": "bounded", "source": loss}`` plus ``"field"``.
    """
    if loss not in BOUNDED_LOSS_SOURCES:
        return loss
    content = {"kind": "bounded", "source": loss}
    if loss == "candidate_field":
        content["field"] = loss_field
    return content


#: The outcomes that the spec's counting policy decides (field of the contract per outcome).
POLICY_FIELDS = {
    PENDING: "pending_as",
    UNRESOLVED: "unresolved_as",
    EVIDENCE_UNAVAILABLE: "evidence_unavailable_as",
    ABSTAINED: "abstained_as",
}


@dataclass(frozen=True)
class Contract:
    """The parts of a spec contract the computation reads, typed.

    ``loss`` is ``"answer_inadmissible"`` or ``"any_error"`` (0/1), or a bounded loss's source,
    ``"unsupported_claim_share"`` or ``"candidate_field"`` (``loss_field``, "" otherwise).
    ``alpha`` is the target risk (selective risk) and miscoverage (conformal); ``delta`` the
    selective-risk failure probability. ``thresholds`` are in declared family order, compared with
    ``score_field`` by ``acceptance`` (``">="``, ``">"``, ``"<="`` or ``"<"``). ``selector`` is
    ``"each_candidate"``, ``"is_selected"``, ``"mode"`` or ``"first_sample"``; ``canonicaliser``
    names a ``certification.stats.canonical`` one; ``stopping_delta`` is the Hoeffding stopping
    rule's level (None: no rule); ``policies`` map outcome fields to ``"error"`` or
    ``"exclude"``; ``seed`` seeds the split simulations.
    """

    method: str
    loss: str
    loss_field: str
    denominator: str
    alpha: Decimal
    delta: Decimal
    thresholds: tuple[float, ...]
    acceptance: str
    score_field: str
    selector: str
    utility: str
    canonicaliser: str
    tie_rule: str
    answer_field: str
    stopping_delta: Decimal | None
    multiplicity: str
    partition: str
    policies: Mapping[str, str]
    report_confidence: Decimal
    seed: int
    description: str

    @classmethod
    def of(cls, content: Mapping[str, Any]) -> Contract:
        """Read a contract dict (``certification.contract.spec_content``).

        Raises:
            KeyError: if a required field is missing.
            decimal.InvalidOperation: if a decimal field is not a number.
        """
        stopping = content.get("stopping_delta")
        loss = content["loss"]
        bounded = isinstance(loss, Mapping)
        return cls(
            method=content["method"],
            loss=loss["source"] if bounded else loss,
            loss_field=loss.get("field", "") if bounded else "",
            denominator=content["denominator"],
            alpha=Decimal(content["alpha"]),
            delta=Decimal(content["delta"]),
            thresholds=tuple(float(t) for t in content["thresholds"]),
            acceptance=content["acceptance"],
            score_field=content["score_field"],
            selector=content["selector"],
            utility=content["utility"],
            canonicaliser=content["canonicaliser"],
            tie_rule=content["tie_rule"],
            answer_field=content["answer_field"],
            stopping_delta=None if stopping is None else Decimal(stopping),
            multiplicity=content["multiplicity"],
            partition=content["partition"],
            policies={key: content[key] for key in POLICY_FIELDS.values()},
            report_confidence=Decimal(content["report_confidence"]),
            seed=int(content["seed"]),
            description=content.get("description", ""),
        )

    @property
    def selective(self) -> bool:
        """Whether selective-risk certification is part of the contract."""
        return self.method in ("selective_risk", "both")

    @property
    def bounded(self) -> bool:
        """Whether the loss is bounded in [0, 1] rather than 0/1 (Hoeffding–Bentkus test)."""
        return self.loss in BOUNDED_LOSS_SOURCES

    @property
    def conformal(self) -> bool:
        """Whether conformal sets are part of the contract."""
        return self.method in ("conformal_set", "both")

    @property
    def sign(self) -> float:
        """+1 for ``>=``/``>``; -1 for ``<=``/``<`` (score <= t iff -score >= -t)."""
        return -1.0 if self.acceptance in ("<=", "<") else 1.0

    @property
    def stats_accept(self) -> str:
        """The inequality on transformed scores: ``">="`` or ``">"``."""
        return ">=" if self.acceptance in (">=", "<=") else ">"
