"""The guarantee ledger: twelve fields that say what a certificate covers, one function each.

Each field function takes the run's :class:`LedgerFacts` and returns the field's sentence; the
parts of a field are joined with ``" | "`` (selective risk first, then conformal sets) when
the contract has both methods. The wording is stored with the run and written into releases, so
any change to it is a change of the result (bump ``STATS_VERSION``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from certification.certificates.contract import Contract
from certification.certificates.jsonnum import from_num
from labeling.vocabulary import ABSTAINED, EVIDENCE_UNAVAILABLE, UNRESOLVED

#: The ledger's fields, in display order: (key, title).
LEDGER_FIELDS = (
    ("population", "Population"),
    ("output_object", "Output object"),
    ("admission_policy", "Admission policy"),
    ("loss", "Loss"),
    ("numerator", "Numerator"),
    ("denominator", "Denominator"),
    ("conditioning", "Conditioning"),
    ("randomness", "Randomness"),
    ("parameters", "Parameters"),
    ("selection_correction", "Selection correction"),
    ("assumptions", "Assumptions"),
    ("composition_boundary", "Composition boundary"),
)

SELECTOR_TEXT = {
    "each_candidate": "every candidate answer (each is its own unit)",
    "is_selected": "the candidate flagged as selected (is_selected)",
    "mode": "the most frequent canonical answer (first sample of it)",
    "first_sample": "the first sampled candidate",
}
LOSS_TEXT = {
    "answer_inadmissible": "1 if the emitted answer's resolved label is not admissible, else 0",
    "any_error": (
        "1 if the emitted answer's resolved label is not admissible or any of its resolved claim "
        "labels is not supported, else 0"
    ),
}
#: Bounded losses, by source (``loss_field`` fills ``{field}``).
BOUNDED_LOSS_TEXT = {
    "unsupported_claim_share": (
        "the share of the emitted answer's assessed claims whose resolved label is not "
        "supported (an answer with no assessed claim: 0 if admissible, else 1)"
    ),
    "candidate_field": "the candidate field {field} of the emitted answer, as imported",
}
RANDOMNESS_TEXT = (
    "The draw of calibration and test questions (assumed i.i.d. from the workload); "
    "generation and evaluator variability are not modelled: answers and scores are "
    "frozen as imported, and labels as resolved in the inputs snapshot."
)


@dataclass(frozen=True)
class LedgerFacts:
    """What the ledger's sentences are filled from.

    ``inputs`` is the snapshot (``project``, ``calibration``, ``partition_frozen_at``,
    ``partition_seed``, ``policy_version``); ``selective``/``conformal`` are None when the
    contract has none; ``dependence``'s ``grouping`` is read; ``pending`` counts unresolved
    candidates per partition.
    """

    contract: Contract
    inputs: Mapping[str, Any]
    selective: Mapping[str, Any] | None
    conformal: Mapping[str, Any] | None
    dependence: Mapping[str, Any]
    pending: Mapping[str, int]


def _policy_text(contract: Contract) -> str:
    words = {"error": "as an error", "exclude": "excluded (counted and reported)"}
    parts = [
        f"{name} {words[contract.policies[field_]]}"
        for name, field_ in (
            (UNRESOLVED, "unresolved_as"),
            (EVIDENCE_UNAVAILABLE, "evidence_unavailable_as"),
            (ABSTAINED, "abstained_as"),
            ("not-yet-resolved (pending)", "pending_as"),
        )
    ]
    return "; ".join(parts)


def _short(value: Any) -> str:
    """A stored number with 4 significant digits, for the ledger's sentences."""
    number = from_num(value)
    return "undefined" if number is None else f"{number:.4g}"


def _excluded_text(excluded: Mapping[str, int]) -> str:
    return ", ".join(f"{count} {reason}" for reason, count in excluded.items()) or "none"


def _joined(*parts: str | None) -> str:
    return " | ".join(part for part in parts if part is not None)


# -- the fields -------------------------------------------------------------------------------
def policy_versions_text(inputs: Mapping[str, Any]) -> str:
    """Return which label policy versions the calibration labels were resolved under.

    One version: ``"label policy v2"``. Several (``mixed_policy_versions``): each version with
    its count, flagged, e.g. ``"MIXED label policy versions v1 (n = 40), v2 (n = 10), counted
    apart here and computed together"``.
    """
    counted = (inputs.get("policy_versions") or {}).get("calibration") or {}
    if len(counted) <= 1:
        version = next(iter(counted), None) or inputs.get("policy_version")
        return f"label policy v{version}"
    listed = ", ".join(f"v{version} (n = {n})" for version, n in counted.items())
    return f"MIXED label policy versions {listed}, counted apart here and computed together"


def population(facts: LedgerFacts) -> str:
    """Return the Population field: partition, project, counts used and excluded, pending."""
    contract, inputs, pending = facts.contract, facts.inputs, facts.pending
    n_questions = len(inputs["calibration"])
    frozen = inputs.get("partition_frozen_at") or "not frozen"
    seed = inputs.get("partition_seed")
    text = (
        f"Eligible questions of the {contract.partition!r} partition of project "
        f"{inputs['project']!r}: {n_questions} questions (partition frozen {frozen}, seed "
        f"{seed}, grouped by source / group key). Labels: resolved labels under "
        f"{policy_versions_text(inputs)}."
    )
    if facts.selective is not None:
        counts = facts.selective["counts"]
        text += (
            f" Selective-risk units: {counts['units']}, excluded "
            f"{_excluded_text(counts['excluded'])}, used n = {counts['used']}."
        )
    if facts.conformal is not None:
        counts = facts.conformal["counts"]
        text += (
            f" Conformal questions: {counts['questions']}, excluded "
            f"{_excluded_text(counts['excluded'])}, used n = {counts['used']}."
        )
    if pending["calibration"]:
        text += (
            f" {pending['calibration']} candidate(s) of this partition are not resolved yet: the "
            "certificate covers only the resolved items of this snapshot."
        )
    if contract.description:
        text += f" Declared: {contract.description}"
    return text


def output_object(facts: LedgerFacts) -> str:
    """Return the Output object field: the selected answer and / or the prediction set."""
    contract = facts.contract
    selective = conformal = None
    if facts.selective is not None:
        chosen = facts.selective["chosen_threshold"]
        selective = (
            f"Selected answer: {SELECTOR_TEXT[contract.selector]}, emitted iff "
            f"{contract.score_field} {contract.acceptance} t"
            + (
                f" (certified operating point t = {chosen})"
                if chosen is not None
                else " (no certified operating point: nothing is emitted)"
            )
        )
    if facts.conformal is not None:
        stopping = (
            f", Hoeffding sequential stopping at delta {contract.stopping_delta}"
            if contract.stopping_delta is not None
            else ""
        )
        conformal = (
            "Prediction set: the top M* canonical answer classes by frequency (answer field "
            f"{contract.answer_field}, canonicaliser {contract.canonicaliser}, tie rule "
            f"{contract.tie_rule}{stopping})"
        )
    return _joined(selective, conformal)


def admission_policy(facts: LedgerFacts) -> str:
    """Return the Admission policy field: what counts as admissible, and the counting policy."""
    contract = facts.contract
    claim_rule = ""
    if contract.loss == "any_error":
        claim_rule = " Claims: a claim that is not 'supported' makes the answer an error."
    elif contract.loss == "unsupported_claim_share":
        claim_rule = " Claims: each claim that is not 'supported' adds to the answer's loss."
    return (
        "Admissible = resolved answer label 'admissible' (consensus or adjudicated) under "
        f"{policy_versions_text(facts.inputs)}. Counting policy: "
        f"{_policy_text(contract)}.{claim_rule} "
        "Unavailable evidence is never turned into a correct label."
    )


def loss(facts: LedgerFacts) -> str:
    """Return the Loss field: each method's 0/1 loss, its range and its unit."""
    contract = facts.contract
    selective = conformal = None
    if facts.selective is not None:
        unit = (
            "candidate answer"
            if contract.selector == "each_candidate"
            else "question (its emitted answer)"
        )
        if contract.bounded:
            text = BOUNDED_LOSS_TEXT[contract.loss].format(field=contract.loss_field)
            selective = f"bounded: {text}; range [0, 1]; unit: {unit}"
        else:
            selective = f"{LOSS_TEXT[contract.loss]}; range {{0, 1}}; unit: {unit}"
    if facts.conformal is not None:
        conformal = (
            "set miscoverage: 1 if no admissible answer class is in the prediction set, else 0 "
            "(a class is admissible iff every one of its samples has loss 0 under: "
            f"{LOSS_TEXT[contract.loss]}); range {{0, 1}}; unit: question"
        )
    return _joined(selective, conformal)


def numerator(facts: LedgerFacts) -> str:
    """Return the Numerator field: what the certified rates count."""
    selective = conformal = None
    if facts.selective is not None:
        selective = (
            "the total loss of the accepted answers (per threshold)"
            if facts.contract.bounded
            else "accepted answers with loss 1 (k_j, per threshold)"
        )
    if facts.conformal is not None:
        conformal = (
            "calibration questions whose best-ranked admissible class ranks above M* "
            "(set miscoverage; no admissible sample = rank infinite)"
        )
    return _joined(selective, conformal)


def denominator(facts: LedgerFacts) -> str:
    """Return the Denominator field: what the certified rates divide by."""
    selective = conformal = None
    if facts.selective is not None:
        selective = (
            f"all eligible units, n = {facts.selective['n']} (unconditional failure rate)"
            if facts.contract.denominator == "eligible_units"
            else "accepted answers (m_j, per threshold): selective risk"
        )
    if facts.conformal is not None:
        conformal = (
            f"calibration questions, n = {facts.conformal['counts']['used']}, unsolvable ones "
            "included"
        )
    return _joined(selective, conformal)


def conditioning(facts: LedgerFacts) -> str:
    """Return the Conditioning field: what each guarantee is conditional on, or marginal over."""
    contract = facts.contract
    parts: list[str] = []
    if facts.selective is not None:
        if contract.denominator == "eligible_units":
            parts.append("unconditional over eligible units (acceptance in the numerator)")
        else:
            parts.append(
                f"conditional on acceptance ({contract.score_field} {contract.acceptance} t)"
            )
        parts.append(
            f"calibration-conditional: the probability of certifying any threshold whose risk "
            f"exceeds alpha is at most delta = {contract.delta} over the calibration draw"
        )
    if facts.conformal is not None:
        parts.append(
            "marginal coverage over the calibration and test draw: not conditional on a "
            "question, a subgroup or the calibration set"
        )
    return _joined(*parts)


def randomness(facts: LedgerFacts) -> str:
    """Return the Randomness field: what the probability is over (the same for every run)."""
    return RANDOMNESS_TEXT


def parameters(facts: LedgerFacts) -> str:
    """Return the Parameters field: alpha, delta, n and the number of thresholds."""
    contract = facts.contract
    selective = conformal = None
    if facts.selective is not None:
        selective = (
            f"alpha = {contract.alpha} (target risk), delta = {contract.delta}, "
            f"n = {facts.selective['n']} calibration units, "
            f"M = {facts.selective['n_thresholds']} thresholds"
        )
    if facts.conformal is not None:
        conformal = (
            f"conformal alpha = {contract.alpha} (miscoverage), "
            f"n = {facts.conformal['counts']['used']}"
        )
    return _joined(selective, conformal)


def selection_correction(facts: LedgerFacts) -> str:
    """Return the Selection correction field: the multiplicity control and the choice rule."""
    contract = facts.contract
    selective = conformal = None
    if facts.selective is not None:
        if contract.multiplicity == "bonferroni":
            selective = (
                f"Bonferroni over the whole prespecified family of M = "
                f"{facts.selective['n_thresholds']} thresholds (per-test level delta/M = "
                f"{_short(facts.selective['test_level'])}); the operating point is chosen among "
                f"certified thresholds by the declared utility ({contract.utility})"
            )
        else:
            selective = (
                "fixed-sequence testing in the family order fixed by the spec, each test at "
                f"level delta = {contract.delta}, stopping at the first failure; chosen by "
                f"{contract.utility}"
            )
    if facts.conformal is not None:
        conformal = "conformal: one prespecified alpha, no search (none needed)"
    return _joined(selective, conformal)


def assumptions(facts: LedgerFacts) -> str:
    """Return the Assumptions field, with the measured within-group correlation."""
    assumed = []
    if facts.selective is not None:
        assumed.append(
            "independent, identically distributed units with a loss bounded in [0, 1] (the "
            "Hoeffding–Bentkus test of selective risk, Learn then Test section 3: valid for any "
            "loss distribution on [0, 1])"
            if facts.contract.bounded
            else "independent, identically distributed units with a binary loss (the exact "
            "binomial test of selective risk)"
        )
    if facts.conformal is not None:
        assumed.append("exchangeable calibration and test questions (conformal sets)")
    joined = "; ".join(assumed)
    # upper-case the first letter only: the names in the sentence keep their capitals
    text = (
        joined[:1].upper() + joined[1:] + "; resolved labels taken as correct. The partition is "
        "grouped by shared sources / group keys (a leakage discipline, not a proof of "
        "independence)."
    )
    grouping = facts.dependence.get("grouping") or {}
    deff = grouping.get("design_effect")
    if deff is not None:
        text += (
            f" Measured within-group correlation: ICC {_short(grouping.get('icc'))}, design "
            f"effect {_short(deff)} (effective n {_short(grouping.get('effective_n'))} of "
            f"{grouping.get('n')}): the nominal delta is optimistic when it exceeds 1."
        )
    elif grouping.get("reason"):
        text += f" Within-group correlation: undefined ({grouping['reason']})."
    return text


def composition_boundary(facts: LedgerFacts) -> str:
    """Return the Composition boundary field: what the certificate does not cover."""
    # The wording is stored in every ledger: a change of it is a change of STATS_VERSION.
    return (
        "Covers the output object exactly as produced by the frozen selector"
        + (" and acceptance rule" if facts.selective is not None else "")
        + "; any later rewriting, truncation, reranking, a different selector or canonicaliser "
        "is outside the certificate."
        + (
            " Set coverage does not imply that the selected answer is admissible: a set may"
            " hold an admissible answer while the one selected is not."
            if facts.conformal is not None
            else ""
        )
        + " Covers only the labels in this run's inputs snapshot."
    )


#: The function that fills each field, by key.
FIELD_FUNCTIONS: Mapping[str, Callable[[LedgerFacts], str]] = {
    "population": population,
    "output_object": output_object,
    "admission_policy": admission_policy,
    "loss": loss,
    "numerator": numerator,
    "denominator": denominator,
    "conditioning": conditioning,
    "randomness": randomness,
    "parameters": parameters,
    "selection_correction": selection_correction,
    "assumptions": assumptions,
    "composition_boundary": composition_boundary,
}


def ledger(
    *,
    contract: Contract,
    inputs: Mapping[str, Any],
    selective: Mapping[str, Any] | None,
    conformal: Mapping[str, Any] | None,
    dependence: Mapping[str, Any],
    pending: Mapping[str, int],
) -> list[dict[str, str]]:
    """Return the guarantee ledger, filled from the contract and the data.

    The twelve fields (:data:`LEDGER_FIELDS`) state what population the certificate is about,
    which output object it covers, how labels are admitted, the loss, the numerator and
    denominator of the certified rate, what it is conditional on, what the probability is over,
    its parameters, the correction for selection, its assumptions and where it stops.

    Raises:
        KeyError: if a section or the snapshot lacks a key a field reads.
    """
    facts = LedgerFacts(
        contract=contract,
        inputs=inputs,
        selective=selective,
        conformal=conformal,
        dependence=dependence,
        pending=pending,
    )
    return [
        {"field": key, "title": title, "value": FIELD_FUNCTIONS[key](facts)}
        for key, title in LEDGER_FIELDS
    ]


def ledger_sha256(entries: Sequence[Mapping[str, str]]) -> str:
    """Return the ledger reference: the sha256 of the canonical JSON of a stored ledger.

    Every decision made under a certificate carries it, so a decision can be matched with the
    exact twelve sentences that state what its guarantee covers (the run page, the API's run
    report and a release's ``ledger.json`` hold the same list). Returns 64 lowercase hex digits.
    """
    # canonical JSON as the spec hash writes it (sorted keys, no whitespace, UTF-8 kept); this
    # package imports nothing of the web side, so the encoder is spelt out here
    text = json.dumps(
        list(entries), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
