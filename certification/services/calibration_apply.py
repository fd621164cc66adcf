"""Applying a done calibration run's frozen certificate to new questions.

The policy and its checks are pure (:mod:`certification.certificates.apply`); this module reads
the run, refuses one whose certificate cannot be applied, and names a refused question by its
position in the request. The decisions' scores (never texts or answers) are recorded for the
run's drift watch (:mod:`certification.services.drift`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from certification.certificates import STATS_VERSION
from certification.certificates.apply import (
    METHODS,
    FrozenCertificate,
    InvalidQuestion,
    certificate_apply,
    certificate_freeze,
    certificate_methods,
    contract_methods,
    question_parse,
)
from certification.certificates.contract import Contract
from certification.certificates.drift import emitted_scores
from certification.contract import spec_content
from certification.exceptions import RunNotApplicable
from certification.models import CalibrationRun, RunStatus
from certification.selectors.drift import drift_json
from certification.services.drift import drift_scores_record
from labeling.exceptions import InvalidInput
from labeling.permissions import REVIEWERS, require_role
from labeling.services.imports import frequency_ranks

#: The most questions one request (or one command line batch) may carry.
MAX_QUESTIONS = 1_000


def calibration_run_certificate(
    *, run: CalibrationRun, method: str | None = None
) -> FrozenCertificate:
    """Return the run's frozen certificate, refusing a run it cannot come from.

    ``method`` (``selective_risk`` or ``conformal_set``) applies one method of a ``both`` spec
    alone, so a run whose other method certifies nothing still gives the one that certifies;
    None applies every method of the spec.

    Raises:
        InvalidInput: ``method`` is not a method of the run's spec (``field`` "method").
        RunNotApplicable: the run is not done; it was computed by another version of the
            statistics than this server's (its result may differ: a new run recomputes it); or
            a method applied certifies nothing (the reason names it and why, and says which
            method may be applied alone).
    """
    if method is not None and method not in contract_methods(Contract.of(spec_content(run.spec))):
        raise InvalidInput(
            f"{method!r} is not a method of calibration run {run.pk}'s spec (method "
            f"{run.spec.method}): one of {', '.join(METHODS)} that it certifies",
            field="method",
        )
    if run.status != RunStatus.DONE:
        raise RunNotApplicable(
            f"calibration run {run.pk} is {run.status}, not done: only a done run's "
            "certificate can be applied"
        )
    if run.stats_version != STATS_VERSION:
        raise RunNotApplicable(
            f"calibration run {run.pk} was computed by statistics version {run.stats_version} "
            f"and this server computes version {STATS_VERSION}: start a run of the spec to "
            "recompute it, then apply that run"
        )
    certificate = certificate_freeze(
        run_id=run.pk,
        spec_sha256=run.spec_sha256,
        input_sha256=run.input_sha256,
        contract=spec_content(run.spec),
        result=run.result,
        method=method,
    )
    if certificate.refusal is not None:
        certified = [
            name for name, half in certificate_methods(run.result).items() if half["certified"]
        ]
        alone = (
            f"; its {certified[0]} method certifies: apply it alone with method {certified[0]!r}"
            if certified and method is None
            else ""
        )
        raise RunNotApplicable(
            f"calibration run {run.pk} certifies nothing to apply: {certificate.refusal}{alone}"
        )
    return certificate


@dataclass(frozen=True)
class _Sample:
    """A candidate of new traffic as the importer's frequency ranking reads it."""

    canonical_form: str | None
    sample_index: int


def frequency_ranks_fill(
    raw: Mapping[str, Any], question: dict[str, Any], contract: Contract
) -> dict[str, Any]:
    """Score each candidate by its frequency rank when the spec needs it and none was sent.

    A spec whose score field is ``frequency_rank`` calibrated on the ranks the import computed
    (:func:`labeling.services.imports.frequency_ranks`: the dense rank of the canonical form by
    frequency among the question's candidates, 1 = most frequent, equal counts by the lower
    sample index, None without a canonical form). When no candidate of the question carries a
    ``score`` key, the same ranks are computed from the answers (the candidates' positions
    are their sample indices); a question that sends scores keeps them. Other specs are left
    alone.

    Args:
        raw: the question as decoded JSON, already accepted by ``question_parse``.
        question: the parsed question (its candidates' ``score`` is filled in).
        contract: the run's contract.

    Returns:
        ``question``.

    Raises:
        InvalidQuestion: ranks are needed but a candidate has no ``answer`` key, or the spec's
            answers are texts (``answer_field`` text), whose ranks the import did not compute.
    """
    if not (contract.selective and contract.score_field == "frequency_rank"):
        return question
    candidates = raw["candidates"]
    if any("score" in candidate for candidate in candidates):
        return question
    if contract.answer_field != "canonical_form":
        raise InvalidQuestion(
            "candidates[0].score",
            "is required: the spec's score is frequency_rank, the rank of canonical forms, and "
            "its answers are texts (answer_field text), so the ranks cannot be computed from "
            "them: send each candidate's frequency_rank as its score",
        )
    for index, candidate in enumerate(candidates):
        if "answer" not in candidate:
            raise InvalidQuestion(
                f"candidates[{index}].answer",
                "is required: no candidate carries a score, so frequency ranks are computed "
                "from the answers (the canonical forms; null = no answer)",
            )
    parsed = question["candidates"]
    ranks = frequency_ranks([_Sample(c["answer"], c["sample"]) for c in parsed])
    for candidate, rank in zip(parsed, ranks, strict=True):
        candidate["score"] = None if rank is None else float(rank)
    return question


def questions_parse(
    certificate: FrozenCertificate, questions: Sequence[Any]
) -> list[dict[str, Any]]:
    """Validate every question (at most :data:`MAX_QUESTIONS`, ids distinct).

    Raises:
        InvalidInput: the first invalid question; ``field`` names it and the field, and the
            message names the question's id when it has one.

    A spec on ``frequency_rank`` gets its ranks computed from the answers of a question that
    sends no score (:func:`frequency_ranks_fill`).
    """
    if not questions:
        raise InvalidInput("at least one question is required", field="questions")
    if len(questions) > MAX_QUESTIONS:
        raise InvalidInput(
            f"at most {MAX_QUESTIONS} questions per request, got {len(questions)}",
            field="questions",
        )
    parsed: list[dict[str, Any]] = []
    seen: dict[Any, int] = {}
    for index, raw in enumerate(questions):
        try:
            question = question_parse(raw, certificate.contract)
            frequency_ranks_fill(raw, question, certificate.contract)
        except InvalidQuestion as refused:
            field = f"questions[{index}]" + (f".{refused.field}" if refused.field else "")
            named = raw.get("id") if isinstance(raw, dict) else None
            about = f"question {named!r}: " if isinstance(named, str | int) else ""
            raise InvalidInput(about + refused.reason, field=field) from None
        key = (type(question["id"]).__name__, question["id"])
        if key in seen:
            raise InvalidInput(
                f"question id {question['id']!r} is also question {seen[key]}",
                field=f"questions[{index}].id",
            )
        seen[key] = index
        parsed.append(question)
    return parsed


def calibration_run_apply(
    *, run: CalibrationRun, actor: Any, questions: Sequence[Any], method: str | None = None
) -> dict[str, Any]:
    """Apply the run's certificate to ``questions``; return the certificate and the decisions.

    Records the scores of the decisions, in order, for the run's drift watch
    (:func:`~certification.services.drift.drift_scores_record`: one insert); the decisions
    themselves depend on the body alone. Adjudicators and managers may apply (as they read
    the run).

    Args:
        run: the calibration run.
        actor: the requesting user (None: the command line).
        questions: the questions as decoded JSON (``question_parse``'s shape).
        method: one method of a ``both`` spec to apply alone, or None for every method
            (see :func:`calibration_run_certificate`).

    Returns:
        ``{"certificate": {run, spec_sha256, input_sha256, ledger_sha256, threshold, m_star},
        "decisions": [...], "drift": {...}}`` (``certificate_apply``'s records, in request
        order; the drift watch as of its last fold, ``certification.selectors.drift_json``).

    Raises:
        NotFound / PermissionDenied: ``actor`` is not an adjudicator or manager of the project.
        RunNotApplicable: see :func:`calibration_run_certificate`.
        InvalidInput: an invalid question (see :func:`questions_parse`) or method.
    """
    require_role(project=run.project, actor=actor, roles=REVIEWERS, action="apply a certificate")
    certificate = calibration_run_certificate(run=run, method=method)
    parsed = questions_parse(certificate, questions)
    decisions = certificate_apply(certificate, parsed)
    watch = drift_scores_record(run=run, scores=emitted_scores(parsed, certificate.contract))
    return {
        "certificate": certificate_json(certificate),
        "decisions": decisions,
        "drift": drift_json(watch),
    }


def certificate_json(certificate: FrozenCertificate) -> dict[str, Any]:
    """The certificate a response is made under: its reference, t and M* (``"inf"``)."""
    m_star = certificate.m_star
    return {
        **certificate.reference.as_json(),
        "method": certificate.contract.method,
        "threshold": certificate.threshold,
        "m_star": None if m_star is None else ("inf" if m_star == float("inf") else int(m_star)),
    }
