"""The rules that span fields of one native record, checked after its fields parse.

Spans against texts (offsets are code points, end-exclusive; a quote is ``text[start:end]``),
references between sources and evidence, repeats, and labels against the project's policy
versions: :func:`check_record` raises the first offending field's :class:`RecordError`, one
rule function per concern. :func:`locate_claim` finds a claim in its answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from labeling.importers.record_errors import RecordError, echo
from labeling.importers.schema import (
    CandidateIn,
    EvidenceIn,
    PolicyVocabulary,
    ResolutionIn,
    WorkloadRecord,
)
from labeling.models import CANNOT_DECIDE, UnresolvedReason
from labeling.vocabulary import CONSENSUS, UNRESOLVED


def _check_span(
    text: str, start: int, end: int, quote: str, field: str, location: str, what: str
) -> None:
    if end < start:
        raise RecordError(location, field, f"span end {end} is before its start {start}")
    if end > len(text):
        raise RecordError(
            location,
            field,
            f"span end {end} is past the end of the {what} ({len(text)} code points)",
        )
    if text[start:end] != quote:
        raise RecordError(
            location,
            field,
            f"quote {echo(quote)} differs from the {what} at [{start}:{end}], "
            f"which is {echo(text[start:end])}",
        )


def locate_claim(answer: str, claim: str, after: int) -> int | None:
    """Return the code-point start of ``claim`` in ``answer``, preferring one at or after ``after``.

    ``claim`` is matched exactly (no stripping, no normalisation); ``after`` is the end of the
    previous claim (claims usually follow the answer's order). None means unanchored.
    """
    pos = answer.find(claim, after)
    if pos < 0:
        pos = answer.find(claim)
    return pos if pos >= 0 else None


def check_record(
    record: WorkloadRecord,
    vocabulary: PolicyVocabulary,
    location: str,
    policies: Mapping[int, PolicyVocabulary] | None = None,
) -> None:
    """Check the rules that span fields of one record.

    ``vocabulary`` holds the labels of the project's newest policy (the default); ``policies``
    the project's policy versions by number: a prior annotation or resolution that names a
    ``policy_version`` must name one of them and its labels are checked against it (None: no
    version may be named).

    Raises:
        RecordError: naming the first offending field as a dotted path, e.g.
            ``candidates[2].claims[0].end``.
    """
    rules = _RecordRules(location, vocabulary, policies or {}, _source_texts(record, location))
    seen_ids: set[str] = set()
    seen_indexes: set[int] = set()
    for c, candidate in enumerate(record.candidates):
        at = f"candidates[{c}]"
        if candidate.id in seen_ids:
            raise RecordError(location, f"{at}.id", f"candidate id {echo(candidate.id)} repeats")
        seen_ids.add(candidate.id)
        index = c if candidate.sample_index is None else candidate.sample_index
        if index in seen_indexes:
            raise RecordError(location, f"{at}.sample_index", f"sample index {index} repeats")
        seen_indexes.add(index)
        _check_claims(candidate, at, location)
        _check_evaluator_labels(candidate, at, vocabulary, location)
        _check_prior_annotations(candidate, at, rules)
        if candidate.resolution is not None:
            _check_resolution(
                candidate.resolution, len(candidate.claims), f"{at}.resolution", rules
            )
        if candidate.gold is not None:
            _check_gold(candidate, f"{at}.gold", location, rules.evidence)


@dataclass(frozen=True)
class _RecordRules:
    """What the rules of one record share: where it came from, its policies and source texts."""

    location: str
    vocabulary: PolicyVocabulary
    policies: Mapping[int, PolicyVocabulary]
    sources: Mapping[str, str]

    def policy_of(self, version: int | None, field: str) -> PolicyVocabulary:
        """The policy version ``version`` names (the newest when None)."""
        if version is None:
            return self.vocabulary
        if version not in self.policies:
            raise RecordError(
                self.location,
                field,
                f"policy version {version} is not a label policy version of the project "
                f"(versions {sorted(self.policies)})",
            )
        return self.policies[version]

    def evidence(self, evidence: EvidenceIn, field: str) -> None:
        """Check that ``evidence`` cites a source of the record and quotes its text."""
        if evidence.source not in self.sources:
            raise RecordError(
                self.location,
                f"{field}.source",
                f"unknown source {echo(evidence.source)} (not in sources)",
            )
        _check_span(
            self.sources[evidence.source],
            evidence.start,
            evidence.end,
            evidence.quote,
            field,
            self.location,
            f"text of source {echo(evidence.source)}",
        )


def _source_texts(record: WorkloadRecord, location: str) -> dict[str, str]:
    """The record's source texts by id; a repeated id must repeat its text and version."""
    sources: dict[str, str] = {}
    source_versions: dict[str, int | None] = {}
    for s, source in enumerate(record.sources):
        if source.id in sources and sources[source.id] != source.text:
            raise RecordError(
                location,
                f"sources[{s}].id",
                f"source id {echo(source.id)} repeats with another text",
            )
        if source.id in sources and source_versions[source.id] != source.version:
            raise RecordError(
                location,
                f"sources[{s}].version",
                f"source id {echo(source.id)} repeats with another version",
            )
        sources[source.id] = source.text
        source_versions[source.id] = source.version
    return sources


def _check_claims(candidate: CandidateIn, at: str, location: str) -> None:
    """A claim's span: both ends or neither, none when unanchored, quoting the answer."""
    for k, claim in enumerate(candidate.claims):
        field = f"{at}.claims[{k}]"
        if (claim.start is None) != (claim.end is None):
            raise RecordError(location, field, "give both start and end, or neither")
        if claim.unanchored and claim.start is not None:
            raise RecordError(
                location, f"{field}.unanchored", "an unanchored claim has no start and end"
            )
        if claim.start is not None and claim.end is not None:
            _check_span(
                candidate.text, claim.start, claim.end, claim.text, field, location, "answer"
            )


def _check_evaluator_labels(
    candidate: CandidateIn, at: str, vocabulary: PolicyVocabulary, location: str
) -> None:
    """An evaluator label: a claim of the candidate; a label or score when available; known."""
    n_claims = len(candidate.claims)
    for e, ev in enumerate(candidate.evaluator_labels):
        field = f"{at}.evaluator_labels[{e}]"
        if ev.claim is not None and ev.claim >= n_claims:
            raise RecordError(
                location, f"{field}.claim", f"claim index {ev.claim} but {n_claims} claims"
            )
        if not ev.available and (ev.label is not None or ev.score is not None):
            raise RecordError(
                location, field, "an unavailable evaluator label has no label and no score"
            )
        if ev.available and ev.label is None and ev.score is None:
            raise RecordError(location, field, "give a label or a score, or set available to false")
        allowed = vocabulary.claim_labels if ev.claim is not None else vocabulary.answer_labels
        if ev.label is not None and ev.label not in allowed:
            raise RecordError(
                location, f"{field}.label", f"{echo(ev.label)} is not one of {sorted(allowed)}"
            )


def _check_prior_annotations(candidate: CandidateIn, at: str, rules: _RecordRules) -> None:
    """Prior annotations: one per annotator and policy version, labels of that version, spans."""
    location = rules.location
    n_claims = len(candidate.claims)
    # One annotation per annotator and policy version: an item labelled again under a new
    # version holds one of each.
    annotators: set[tuple[str, int | None]] = set()
    for p, prior in enumerate(candidate.prior_annotations):
        field = f"{at}.prior_annotations[{p}]"
        if (prior.annotator, prior.policy_version) in annotators:
            raise RecordError(
                location,
                f"{field}.annotator",
                f"annotator {echo(prior.annotator)} repeats"
                + ("" if prior.policy_version is None else " under this policy version"),
            )
        annotators.add((prior.annotator, prior.policy_version))
        used = rules.policy_of(prior.policy_version, f"{field}.policy_version")
        # cannot_decide is a vote (it never agrees), as in live annotations.
        _check_label(
            prior.answer_label,
            used.answer_labels | {CANNOT_DECIDE},
            f"{field}.answer_label",
            location,
        )
        _check_label(prior.answer_reason, used.reasons, f"{field}.answer_reason", location)
        labelled: set[int] = set()
        for q, claim_label in enumerate(prior.claim_labels):
            cfield = f"{field}.claim_labels[{q}]"
            _check_claim_index(claim_label.claim, labelled, n_claims, cfield, location)
            _check_label(
                claim_label.label,
                used.claim_labels | {CANNOT_DECIDE},
                f"{cfield}.label",
                location,
            )
            _check_label(claim_label.reason, used.reasons, f"{cfield}.reason", location)
            for v, evidence in enumerate(claim_label.evidence):
                rules.evidence(evidence, f"{cfield}.evidence[{v}]")
        for s, span in enumerate(prior.spans):
            sfield = f"{field}.spans[{s}]"
            _check_span(
                candidate.text, span.start, span.end, span.quote, sfield, location, "answer"
            )
            if span.evidence is not None:
                rules.evidence(span.evidence, f"{sfield}.evidence")


def _check_resolution(
    resolution: ResolutionIn, n_claims: int, field: str, rules: _RecordRules
) -> None:
    """A candidate's resolution: its fields and policy, then its evidence (each span once)."""
    used = rules.policy_of(resolution.policy_version, f"{field}.policy_version")
    _check_resolution_fields(resolution, used, n_claims, field, rules.location)
    for q, resolved in enumerate(resolution.claim_labels):
        spans: set[tuple[str, int, int]] = set()
        for v, evidence in enumerate(resolved.evidence):
            efield = f"{field}.claim_labels[{q}].evidence[{v}]"
            rules.evidence(evidence, efield)
            if evidence.end <= evidence.start:
                raise RecordError(
                    rules.location,
                    f"{efield}.end",
                    "resolved evidence cites at least one code point",
                )
            key = (evidence.source, evidence.start, evidence.end)
            if key in spans:
                raise RecordError(rules.location, efield, "the same span is cited twice")
            spans.add(key)


def _check_claim_index(
    claim: int, labelled: set[int], n_claims: int, field: str, location: str
) -> None:
    """A claim label's ``claim``: an index of the candidate's claims, labelled once (added)."""
    if claim >= n_claims:
        raise RecordError(location, f"{field}.claim", f"claim index {claim} but {n_claims} claims")
    if claim in labelled:
        raise RecordError(location, f"{field}.claim", f"claim {claim} labelled twice")
    labelled.add(claim)


def _check_gold(
    candidate: CandidateIn,
    field: str,
    location: str,
    check_evidence: Callable[[EvidenceIn, str], None],
) -> None:
    """Check a candidate's ``gold``: no votes beside it, each claim labelled once, spans valid.

    The labels themselves are checked against the policy when the reference is written
    (:func:`labeling.services.gold.gold_reference_set`), with the same field names.
    """
    gold = candidate.gold
    if gold is None:
        return
    for votes in ("prior_annotations", "resolution"):
        if getattr(candidate, votes):
            raise RecordError(
                location,
                field,
                f"a gold item has no votes: give gold or {votes}, not both",
            )
    n_claims = len(candidate.claims)
    labelled: set[int] = set()
    for q, claim_label in enumerate(gold.claim_labels):
        cfield = f"{field}.claim_labels[{q}]"
        _check_claim_index(claim_label.claim, labelled, n_claims, cfield, location)
        for v, evidence in enumerate(claim_label.evidence):
            check_evidence(evidence, f"{cfield}.evidence[{v}]")
    missing = sorted(set(range(n_claims)) - labelled)
    if missing:
        raise RecordError(
            location,
            f"{field}.claim_labels",
            f"every claim needs a reference label; claims {missing} have none",
        )


def _check_resolution_fields(
    resolution: ResolutionIn,
    vocabulary: PolicyVocabulary,
    n_claims: int,
    field: str,
    location: str,
) -> None:
    """Check a resolution's fields against its status (the database constraints) and policy."""

    def refuse(name: str, reason: str) -> None:
        raise RecordError(location, f"{field}.{name}", reason)

    status = resolution.status
    if status == UNRESOLVED:
        if resolution.unresolved_reason is None:
            refuse("unresolved_reason", "an unresolved resolution needs an unresolved_reason")
        if resolution.unresolved_reason not in UnresolvedReason.values:
            refuse(
                "unresolved_reason",
                f"{echo(resolution.unresolved_reason)} is not "
                f"one of {sorted(UnresolvedReason.values)}",
            )
        for name in ("answer_label", "answer_reason"):
            if getattr(resolution, name) is not None:
                refuse(name, f"an unresolved resolution has no {name}")
        if resolution.claim_labels:
            refuse("claim_labels", "an unresolved resolution has no claim labels")
    else:
        if resolution.answer_label is None:
            refuse("answer_label", f"a {status} resolution needs an answer_label")
        if resolution.unresolved_reason is not None:
            refuse("unresolved_reason", f"a {status} resolution has no unresolved_reason")
    if status == CONSENSUS and resolution.adjudicator is not None:
        refuse("adjudicator", "a consensus resolution has no adjudicator")
    if status != CONSENSUS and resolution.adjudicator is None:
        refuse("adjudicator", f"an {status} resolution names its adjudicator (a pseudonym)")
    _check_label(
        resolution.answer_label, vocabulary.answer_labels, f"{field}.answer_label", location
    )
    _check_label(resolution.answer_reason, vocabulary.reasons, f"{field}.answer_reason", location)
    labelled: set[int] = set()
    for q, claim_label in enumerate(resolution.claim_labels):
        cfield = f"{field}.claim_labels[{q}]"
        _check_claim_index(claim_label.claim, labelled, n_claims, cfield, location)
        _check_label(claim_label.label, vocabulary.claim_labels, f"{cfield}.label", location)
        _check_label(claim_label.reason, vocabulary.reasons, f"{cfield}.reason", location)


def _check_label(value: str | None, allowed: frozenset[str], field: str, location: str) -> None:
    if value is not None and value not in allowed:
        raise RecordError(location, field, f"{echo(value)} is not one of {sorted(allowed)}")
