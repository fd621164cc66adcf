"""Applying a frozen certificate to questions: accept / abstain, and prediction sets.

A done calibration run fixes its spec's policy: with selective risk, the certified operating
point t (an answer is emitted iff its score passes t under the declared acceptance inequality;
no certified t means fail closed: nothing is emitted); with conformal sets, M* (the set of a
question is its top M* canonical answer classes by frequency; M* infinite means the whole answer
space). :func:`certificate_apply` applies that policy, exactly as the run's held-out report
applied it to the test partition, to any questions shaped like the run's inputs: the same
selector, canonicaliser, tie rule, stopping rule and score field. It reads no label.

Every decision carries the certificate it was made under (:class:`CertificateReference`): the
run id, the spec's content hash, the run's input hash and the ledger reference (the sha256 of
the run's guarantee ledger, :func:`~certification.certificates.ledger.ledger_sha256`). The
guarantee is the run's: marginal over questions drawn like the calibration questions (Learn
then Test, Angelopoulos et al. 2021, section 3; split conformal prediction, Vovk, Gammerman and
Shafer 2005), not a statement about any one question.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from certification.certificates.contract import Contract
from certification.certificates.jsonnum import from_num
from certification.certificates.ledger import ledger_sha256
from certification.stats.canonical import get_canonicaliser

if TYPE_CHECKING:
    from certification.certificates.units import PreparedQuestion

# The decisions (below) import thresholds and units, and so NumPy, where they are made: the
# limits, checks and freezing of this module serve the web process's serializers and pages, which
# must not load NumPy.

#: The most candidates one question may carry.
MAX_CANDIDATES = 1_000
#: The longest answer text, in characters, and the longest question or candidate id.
MAX_ANSWER = 10_000
MAX_ID = 200
QUESTION_KEYS = frozenset({"id", "candidates"})
CANDIDATE_KEYS = frozenset({"id", "answer", "score", "selected"})
#: The methods of a contract, each certified, reported and applied on its own.
SELECTIVE_RISK = "selective_risk"
CONFORMAL_SET = "conformal_set"
METHODS = (SELECTIVE_RISK, CONFORMAL_SET)
#: Why a unit is not accepted (``reason`` of an abstention).
NO_OPERATING_POINT = "no_certified_operating_point"
NO_ANSWER = "no_answer"
MISSING_SCORE = "missing_score"
BELOW_THRESHOLD = "score_fails_threshold"
WHOLE_SPACE_NOTE = (
    "M* is infinite: the certified set is the whole answer space, every answer including ones "
    "not sampled; 'classes' lists the sampled classes, ranked"
)


class InvalidQuestion(ValueError):
    """A malformed question of new traffic; ``field`` names where ("" for the question)."""

    def __init__(self, field: str, reason: str) -> None:
        # a key or value quoted back may hold a lone surrogate, which no response can encode
        field, reason = printable(field), printable(reason)
        super().__init__(f"{field}: {reason}" if field else reason)
        self.field = field
        self.reason = reason


def printable(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, so that it encodes as UTF-8."""
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


@dataclass(frozen=True)
class CertificateReference:
    """What every decision carries: which certificate made it.

    ``spec_sha256`` hashes the contract's canonical JSON, ``input_sha256`` the run's input
    (labels, spec and statistics' version), ``ledger_sha256`` the run's stored guarantee ledger.
    """

    run: int
    spec_sha256: str
    input_sha256: str
    ledger_sha256: str

    def as_json(self) -> dict[str, Any]:
        """The reference as JSON primitives."""
        return {
            "run": self.run,
            "spec_sha256": self.spec_sha256,
            "input_sha256": self.input_sha256,
            "ledger_sha256": self.ledger_sha256,
        }


@dataclass(frozen=True)
class FrozenCertificate:
    """A done run's policy: the contract, t and M*, and the reference decisions carry.

    ``threshold`` is in the score field's units, None when none is certified or the contract has
    no selective risk; ``m_star`` is a number of classes (possibly ``math.inf``), None without
    conformal sets; ``refusal`` says why the certificate cannot be applied.
    """

    reference: CertificateReference
    contract: Contract
    threshold: float | None
    m_star: float | None
    refusal: str | None


def certificate_methods(result: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Return, per method of a done run, whether it certifies and why not.

    Each method of a ``both`` spec certifies on its own: selective risk when a threshold is
    certified, conformal sets when M* exists (an infinite M* certifies the whole answer space:
    a certificate, a vacuous one). Either may then be applied alone (:func:`certificate_freeze`).
    Returns ``{method: {"certified": bool, "reason": str | None}}`` for the methods of
    :data:`METHODS` the result holds, in that order.
    """
    selective, conformal = result.get("selective_risk"), result.get("conformal")
    reasons: dict[str, str | None] = {}
    if selective is not None:
        reasons[SELECTIVE_RISK] = (
            None
            if selective.get("chosen_threshold") is not None
            else f"no certified operating point: {selective.get('reason') or 'none certified'}"
        )
    if conformal is not None:
        reasons[CONFORMAL_SET] = (
            None
            if conformal.get("threshold") is not None
            else f"no conformal threshold: {conformal.get('reason') or 'undefined'}"
        )
    return {name: {"certified": why is None, "reason": why} for name, why in reasons.items()}


def certificate_status(result: Mapping[str, Any], methods: Collection[str] = METHODS) -> str | None:
    """Return why a done run certifies nothing usable in ``methods``, or None when it does.

    ``methods`` defaults to every method of the run; the reason is the first in words
    (:func:`certificate_methods`).
    """
    reasons = [
        half["reason"]
        for name, half in certificate_methods(result).items()
        if name in methods and half["reason"] is not None
    ]
    return reasons[0] if reasons else None


def contract_methods(contract: Contract) -> tuple[str, ...]:
    """The methods of :data:`METHODS` a contract certifies (both for ``both``)."""
    return tuple(
        name
        for name, used in (
            (SELECTIVE_RISK, contract.selective),
            (CONFORMAL_SET, contract.conformal),
        )
        if used
    )


def certificate_freeze(
    *,
    run_id: int,
    spec_sha256: str,
    input_sha256: str,
    contract: Mapping[str, Any],
    result: Mapping[str, Any],
    method: str | None = None,
) -> FrozenCertificate:
    """Read a done run's certificate from its contract and stored result.

    ``method`` is one method of a ``both`` contract (:data:`METHODS`) to apply alone (the
    contract's ``method`` becomes it; the caller checks the contract has it), or None for every
    method; ``refusal`` says when a method applied certifies nothing.

    Raises:
        KeyError: if the result lacks the ledger or a section the contract names.
    """
    terms = Contract.of(contract)
    if method is not None:
        terms = replace(terms, method=method)
    threshold = m_star = None
    if terms.selective:
        threshold = result["selective_risk"]["chosen_threshold"]
    if terms.conformal and result["conformal"]["threshold"] is not None:
        m_star = from_num(result["conformal"]["threshold"]["value"])
    reference = CertificateReference(
        run=run_id,
        spec_sha256=spec_sha256,
        input_sha256=input_sha256,
        ledger_sha256=ledger_sha256(result["ledger"]),
    )
    return FrozenCertificate(
        reference=reference,
        contract=terms,
        threshold=None if threshold is None else float(threshold),
        m_star=None if m_star is None else float(m_star),
        refusal=certificate_status(result, contract_methods(terms)),
    )


# -- input ------------------------------------------------------------------------------------
def _text(value: str, field: str) -> str:
    """Refuse a lone surrogate: it cannot be written as UTF-8, so it could not be answered."""
    surrogate = next((c for c in value if 0xD800 <= ord(c) <= 0xDFFF), None)
    if surrogate is not None:
        code = f"U+{ord(surrogate):04X}"
        raise InvalidQuestion(field, f"surrogate characters are not allowed: {code}")
    return value


def _identifier(value: Any, field: str) -> str | int:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InvalidQuestion(field, f"must be a string or an integer, got {value!r}"[:300])
    if isinstance(value, str) and not (0 < len(value) <= MAX_ID):
        raise InvalidQuestion(field, f"must be 1 to {MAX_ID} characters")
    return _text(value, field) if isinstance(value, str) else value


def _candidate(raw: Any, field: str, contract: Contract, position: int) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise InvalidQuestion(field, "must be an object")
    unknown = sorted(str(key) for key in raw if key not in CANDIDATE_KEYS)
    if unknown:
        raise InvalidQuestion(
            f"{field}.{unknown[0]}", f"unknown field (allowed: {', '.join(sorted(CANDIDATE_KEYS))})"
        )
    reads_answers = contract.conformal or contract.selector == "mode"
    if reads_answers and "answer" not in raw:
        raise InvalidQuestion(
            f"{field}.answer",
            f"is required: the spec ranks answers ({contract.answer_field}); null = no answer",
        )
    answer = raw.get("answer")
    if answer is not None and not isinstance(answer, str):
        raise InvalidQuestion(f"{field}.answer", "must be a string or null")
    if answer is not None and len(answer) > MAX_ANSWER:
        raise InvalidQuestion(f"{field}.answer", f"at most {MAX_ANSWER} characters")
    if answer is not None:
        _text(answer, f"{field}.answer")
    score = raw.get("score")
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise InvalidQuestion(f"{field}.score", "must be a number or null")
        beyond = f"must be a finite number within the 64-bit float range, got {repr(score)[:40]}"
        try:
            score = float(score)
        except OverflowError:  # an integer beyond the float range
            raise InvalidQuestion(f"{field}.score", beyond) from None
        if not math.isfinite(score):  # JSON's 1e400 is read as infinity
            raise InvalidQuestion(f"{field}.score", beyond)
    selected = raw.get("selected", False)
    if not isinstance(selected, bool):
        raise InvalidQuestion(f"{field}.selected", "must be true or false")
    given_id = raw.get("id")
    return {
        "id": None if given_id is None else _identifier(given_id, f"{field}.id"),
        "sample": position,
        "answer": answer,
        "selected": selected,
        "score": score,
    }


def question_parse(raw: Any, contract: Contract) -> dict[str, Any]:
    """Validate one question of new traffic; return it in the shape of the run's inputs.

    A question is ``{"id": str | int, "candidates": [candidate, ...]}`` with 1 to
    :data:`MAX_CANDIDATES` candidates in sample order; a candidate is ``{"id"?: str | int,
    "answer": str | null, "score"?: number | null, "selected"?: bool}``: ``answer`` is the
    spec's answer field (required when the spec ranks answers: conformal sets or the ``mode``
    selector), ``score`` its score field (absent or null = missing: never accepted),
    ``selected`` the ``is_selected`` flag. Unknown keys are refused. Returns ``{"id",
    "candidates": [{"id", "sample", "answer", "selected", "score"}]}``.

    Raises:
        InvalidQuestion: naming the field (``id``, ``candidates[3].score``, ...).
    """
    if not isinstance(raw, Mapping):
        raise InvalidQuestion("", "a question must be an object")
    unknown = sorted(str(key) for key in raw if key not in QUESTION_KEYS)
    if unknown:
        raise InvalidQuestion(unknown[0], "unknown field (allowed: candidates, id)")
    if "id" not in raw:
        raise InvalidQuestion("id", "is required")
    identifier = _identifier(raw["id"], "id")
    candidates = raw.get("candidates")
    if not isinstance(candidates, list) or not candidates:
        raise InvalidQuestion("candidates", "must be a non-empty list of candidates")
    if len(candidates) > MAX_CANDIDATES:
        raise InvalidQuestion("candidates", f"at most {MAX_CANDIDATES} candidates")
    return {
        "id": identifier,
        "candidates": [
            _candidate(c, f"candidates[{i}]", contract, i) for i, c in enumerate(candidates)
        ],
    }


# -- decisions --------------------------------------------------------------------------------
def prepared_question(
    question: Mapping[str, Any], contract: Contract, canon: Any
) -> PreparedQuestion:
    """The question ranked for the policy (no label read)."""
    from certification.certificates.units import PreparedQuestion, rank_answers

    ranked = rank_answers(question["candidates"], contract, canon)
    profile = ranked.profile
    mode = None
    if profile.mode is not None:
        mode = next(c for c, f in zip(ranked.kept, ranked.forms, strict=True) if f == profile.mode)
    return PreparedQuestion(
        question=question,
        samples_available=ranked.samples_available,
        samples_used=len(ranked.kept),
        classes=profile.classes,
        mode_candidate=mode,
    )


def _decision(
    candidate: Mapping[str, Any] | None, position: int | None, certificate: FrozenCertificate
) -> dict[str, Any]:
    """Accept or abstain for one emitted unit, as the held-out report decides it."""
    from certification.certificates.thresholds import accepts

    contract, threshold = certificate.contract, certificate.threshold
    raw = None if candidate is None else candidate.get("score")
    decision: dict[str, Any] = {
        "candidate_index": position,
        "candidate_id": None if candidate is None else candidate.get("id"),
        "answer": None if candidate is None else candidate.get("answer"),
        "score": raw,
    }
    if candidate is None:
        reason: str | None = NO_ANSWER
    elif threshold is None:
        reason = NO_OPERATING_POINT
    elif raw is None or (isinstance(raw, float) and math.isnan(raw)):
        reason = MISSING_SCORE
    elif accepts(contract.sign * float(raw), threshold, contract):
        reason = None
    else:
        reason = BELOW_THRESHOLD
    decision["decision"] = "accept" if reason is None else "abstain"
    decision["reason"] = reason
    return decision


def _selective(prepared: PreparedQuestion, certificate: FrozenCertificate) -> dict[str, Any]:
    from certification.certificates.units import selected_candidates

    contract = certificate.contract
    candidates = list(prepared.question["candidates"])
    decisions = []
    for candidate in selected_candidates(prepared, contract.selector):
        position = None
        if candidate is not None:
            position = next(i for i, c in enumerate(candidates) if c is candidate)
        decisions.append(_decision(candidate, position, certificate))
    threshold = certificate.threshold
    return {
        "rule": f"accept iff {contract.score_field} {contract.acceptance} {threshold}"
        if threshold is not None
        else "no certified operating point: abstain (fail closed)",
        "threshold": threshold,
        "selector": contract.selector,
        "decisions": decisions,
    }


def _prediction_set(prepared: PreparedQuestion, m_star: float) -> dict[str, Any]:
    classes = list(prepared.classes)
    whole = math.isinf(m_star)
    members = classes if whole else classes[: int(m_star)]
    return {
        "m_star": "inf" if whole else int(m_star),
        "whole_answer_space": whole,
        "classes": members,
        "size": len(members),
        "samples_used": prepared.samples_used,
        "samples_available": prepared.samples_available,
        "note": WHOLE_SPACE_NOTE if whole else None,
    }


def certificate_apply(
    certificate: FrozenCertificate, questions: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Apply the frozen policy to each question; return one decision record per question.

    ``questions`` are in the run's inputs shape (:func:`question_parse`, or the run's snapshot).
    Each record holds ``question`` (its id), ``certificate``
    (:meth:`CertificateReference.as_json`), with selective risk ``selective_risk`` (``rule``,
    ``threshold``, ``selector`` and ``decisions``: one per emitted unit, each ``decision`` =
    ``"accept"`` or ``"abstain"`` with its ``reason``, the candidate's index, id, answer and
    score), and with conformal sets ``prediction_set`` (``m_star``, ``whole_answer_space``, the
    ranked ``classes`` in the set, their number ``size``, the samples used), None when the run
    has no conformal threshold.

    Raises:
        StatsError: from the stopping rule or the canonicaliser on malformed answers.
    """
    contract = certificate.contract
    canon = get_canonicaliser(contract.canonicaliser)
    reference = certificate.reference.as_json()
    records = []
    for question in questions:
        prepared = prepared_question(question, contract, canon)
        record: dict[str, Any] = {"question": question["id"], "certificate": reference}
        if contract.selective:
            record["selective_risk"] = _selective(prepared, certificate)
        if contract.conformal:
            m_star = certificate.m_star
            record["prediction_set"] = None if m_star is None else _prediction_set(prepared, m_star)
        records.append(record)
    return records


def heldout_decisions(
    certificate: FrozenCertificate, inputs: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The decisions on the run's own test partition, with each unit's resolved outcome.

    The policy is applied by :func:`certificate_apply`, reading no label; the labels then say
    how each decision fared, as the held-out report counts it: per selective decision
    ``excluded`` (why the unit is left out of the held-out figures under the counting policy,
    or None) and ``loss`` (the emitted unit's 0/1 loss, None when excluded or without an
    answer), with a bounded loss also ``bounded_loss`` (in [0, 1]); per prediction set
    ``excluded`` and ``set_covers`` (whether an admissible class is in the set). One record per
    test question, in snapshot order, with the question's ``external_id`` added.
    """
    from certification.certificates.units import make_units, prepare_question

    contract = certificate.contract
    canon = get_canonicaliser(contract.canonicaliser)
    questions = inputs["test"]
    records = certificate_apply(certificate, questions)
    for question, record in zip(questions, records, strict=True):
        labelled = prepare_question(question, contract, canon)
        # the held-out report's units and exclusions (``heldout.heldout_units``)
        units = make_units([labelled], contract)
        reasons = [u.excluded or (labelled.excluded if contract.conformal else None) for u in units]
        record["external_id"] = question.get("external_id")
        if contract.selective:
            decisions = record["selective_risk"]["decisions"]
            for unit, reason, decision in zip(units, reasons, decisions, strict=True):
                decision["excluded"] = reason
                decision["loss"] = None if reason is not None else unit.loss
                if contract.bounded:
                    decision["bounded_loss"] = None if reason is not None else unit.bounded_loss
        if record.get("prediction_set") is not None and certificate.m_star is not None:
            record["prediction_set"]["excluded"] = reasons[0]
            # as the held-out report: an empty set (no sampled answer) covers nothing
            record["prediction_set"]["set_covers"] = (
                bool(labelled.classes) and labelled.score <= certificate.m_star
            )
    return records
