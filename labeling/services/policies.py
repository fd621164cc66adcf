"""Label policy descriptions: one validation of a full policy, and editing the draft version.

A *policy description* is everything a manager decides about a label policy version: the
evidence relation, the guideline (Markdown), which labels each level offers (within the fixed
schema of :data:`labeling.selectors.policies.SCHEMA`), each label's display text, description
and shortcut key, which claim labels must cite evidence, the reasons offered for
``evidence_unavailable`` with their display text, and the gold rule: how often gold items are
served (``gold_rate``) and whether a new annotator first qualifies on gold items
(``qualification_required``, ``qualification_items`` k, ``qualification_threshold``; see
:mod:`labeling.services.gold`), and each label set's level of measurement (``answer_scale``,
``claim_scale``: a :class:`~labeling.models.LabelScale`, which picks the metric of
Krippendorff's alpha). :func:`policy_description_check` validates
one and returns a :class:`PolicyDescription`, whose :meth:`~PolicyDescription.model_fields` are
the :class:`~labeling.models.LabelPolicy` fields it sets; a new version is made from the same
description (publishing v+1 validates with the same function).

The draft (the project's newest version, while not frozen) is edited by :func:`policy_update`;
a frozen version never changes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from labeling import permissions, vocabulary
from labeling.derived import derived_mark
from labeling.exceptions import ErrorCode, InvalidTransition, PermissionDenied
from labeling.importers.record_errors import echo
from labeling.locks import project_label_writes_lock, project_lock
from labeling.models import DerivedKind, EvidenceRelation, LabelPolicy, LabelScale, Project
from labeling.models.catalog import scale_problem
from labeling.selectors.policies import (
    CITABLE,
    DEFAULT_DESCRIPTIONS,
    DEFAULT_REASON_TEXTS,
    DEFAULT_TEXTS,
    REASONS,
    RESERVED_KEYS,
    SCHEMA,
    LabelChoice,
    Level,
    ReasonChoice,
    default_key,
    description_rows,
)
from labeling.services.label_checks import Problems

logger = logging.getLogger(__name__)

MAX_GUIDELINE_LENGTH = 100_000
MAX_TEXT_LENGTH = 60
MAX_DESCRIPTION_LENGTH = 1000
MAX_REASON_TEXT_LENGTH = 120
# A shortcut key: one lower-case ASCII letter or digit (the page's own keys are reserved).
KEY_PATTERN = re.compile(r"[a-z0-9]")
# Control characters other than tab and newline cannot be typed and break display.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff]")

TOP_KEYS = frozenset(
    {"evidence_relation", "guideline", "answer_labels", "claim_labels", "unavailable_reasons"}
)
LABEL_KEYS: Mapping[Level, frozenset[str]] = {
    "answer": frozenset({"value", "text", "description", "key"}),
    "claim": frozenset({"value", "text", "description", "key", "requires_evidence"}),
}
REASON_KEYS = frozenset({"value", "text"})
# The gold rule's fields: optional, absent means these values (no gold served, no
# qualification), so a description written before the rule existed keeps its meaning.
GOLD_RULE_DEFAULTS: Mapping[str, Any] = {
    "gold_rate": 0.0,
    "qualification_required": False,
    "qualification_items": 5,
    "qualification_threshold": 0.8,
}
# k above this is certainly a typo (a qualification of a thousand gold items).
MAX_QUALIFICATION_ITEMS = 1000
# Each label set's declared scale: optional, absent means nominal (labels are names), the
# meaning of every description written before scales could be declared.
SCALE_FIELDS: Mapping[Level, str] = {"answer": "answer_scale", "claim": "claim_scale"}
# The policy fields the agreement figures read besides the votes: the scales and, for an
# ordinal scale, the labels' order.
AGREEMENT_FIELDS = ("answer_labels", "claim_labels", *SCALE_FIELDS.values())


@dataclass(frozen=True)
class PolicyDescription:
    """A validated label policy description (see the module docstring).

    ``answer_labels`` and ``claim_labels`` are in display order; ``requires_evidence`` is set
    only on claim labels. ``unavailable_reasons`` may be empty only when no level offers
    ``evidence_unavailable``. ``answer_scale`` and ``claim_scale`` are
    :class:`~labeling.models.LabelScale` values.
    """

    evidence_relation: str
    guideline: str
    answer_labels: tuple[LabelChoice, ...]
    claim_labels: tuple[LabelChoice, ...]
    unavailable_reasons: tuple[ReasonChoice, ...]
    gold_rate: float = 0.0
    qualification_required: bool = False
    qualification_items: int = 5
    qualification_threshold: float = 0.8
    answer_scale: str = LabelScale.NOMINAL.value
    claim_scale: str = LabelScale.NOMINAL.value

    def gold_rule(self) -> dict[str, Any]:
        """Return the gold rule's fields (``GOLD_RULE_DEFAULTS``' keys) and values."""
        return {name: getattr(self, name) for name in GOLD_RULE_DEFAULTS}

    def data(self) -> dict[str, Any]:
        """Return the description as JSON-ready data, in the shape the check accepts."""
        answer, reasons = description_rows("answer", self.answer_labels, self.unavailable_reasons)
        claim, _ = description_rows("claim", self.claim_labels, ())
        return {
            "evidence_relation": self.evidence_relation,
            "guideline": self.guideline,
            "answer_labels": answer,
            "claim_labels": claim,
            "unavailable_reasons": reasons,
            **self.gold_rule(),
            "answer_scale": self.answer_scale,
            "claim_scale": self.claim_scale,
        }

    def model_fields(self) -> dict[str, Any]:
        """Return the :class:`~labeling.models.LabelPolicy` field values this description sets.

        Keys: ``evidence_relation``, ``guideline``, ``answer_labels``, ``claim_labels``,
        ``unavailable_reasons`` (lists of values), ``label_details`` (``{level: {value:
        {"text", "description", "key"}}}``), ``evidence_labels`` (claim values) and
        ``reason_texts`` (``{reason: text}``), the gold rule's four fields, ``answer_scale``
        and ``claim_scale``.
        """
        levels = {"answer": self.answer_labels, "claim": self.claim_labels}
        return {
            "evidence_relation": self.evidence_relation,
            "guideline": self.guideline,
            "answer_labels": [c.value for c in self.answer_labels],
            "claim_labels": [c.value for c in self.claim_labels],
            "unavailable_reasons": [r.value for r in self.unavailable_reasons],
            "label_details": {
                level: {
                    c.value: {"text": c.text, "description": c.description, "key": c.key}
                    for c in choices
                }
                for level, choices in levels.items()
            },
            "evidence_labels": [c.value for c in self.claim_labels if c.requires_evidence],
            "reason_texts": {r.value: r.text for r in self.unavailable_reasons},
            **self.gold_rule(),
            "answer_scale": self.answer_scale,
            "claim_scale": self.claim_scale,
        }


def _text(
    problems: Problems,
    field: str,
    entry: Mapping[str, Any],
    name: str,
    *,
    limit: int,
    default: str,
    required: bool,
) -> str:
    """Return ``entry[name]`` stripped (``default`` when absent); record a problem when wrong.

    The length limit applies to the text as given (before stripping).
    """
    if name not in entry:
        return default
    value = entry[name]
    if not isinstance(value, str):
        problems.add(field, "expected text")
        return default
    if len(value) > limit:
        problems.add(field, f"at most {limit} characters, got {len(value)}")
    elif required and not value.strip():
        problems.add(field, "must not be empty")
    elif _CONTROL.search(value):
        problems.add(field, "contains a control character")
    return value.strip()


def _labels(problems: Problems, level: Level, given: Any) -> tuple[LabelChoice, ...]:
    """Check one level's label list; return the valid labels (problems recorded)."""
    field = f"{level}_labels"
    allowed = SCHEMA[level]
    if not isinstance(given, list):
        problems.add(field, "expected a list of labels")
        return ()
    if not given:
        problems.add(field, f"offer at least one label, from {list(allowed)}")
        return ()
    choices: list[LabelChoice] = []
    seen: set[str] = set()
    keys: dict[str, str] = {}
    for position, entry in enumerate(given):
        at = f"{field}[{position}]"
        if not isinstance(entry, dict):
            problems.add(at, 'expected an object with "value" and optional "text", "description"')
            continue
        unknown = sorted(set(entry) - LABEL_KEYS[level])
        if unknown:
            why = (
                "only claim labels can require evidence"
                if unknown == ["requires_evidence"]
                else f"unknown field; the fields are {sorted(LABEL_KEYS[level])}"
            )
            problems.add(f"{at}.{unknown[0]}", why)
            continue
        value = entry.get("value")
        if not isinstance(value, str) or value not in allowed:
            problems.add(
                f"{at}.value",
                f"{echo(value)} is not a {level} label; a policy chooses from {list(allowed)}",
            )
            continue
        if value in seen:
            problems.add(f"{at}.value", f"{value} is offered twice")
            continue
        seen.add(value)
        text = _text(
            problems,
            f"{at}.text",
            entry,
            "text",
            limit=MAX_TEXT_LENGTH,
            default=DEFAULT_TEXTS.get(value, value),
            required=True,
        )
        description = _text(
            problems,
            f"{at}.description",
            entry,
            "description",
            limit=MAX_DESCRIPTION_LENGTH,
            default=DEFAULT_DESCRIPTIONS[level].get(value, ""),
            required=False,
        )
        key = entry.get("key", default_key(position))
        if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
            problems.add(f"{at}.key", f"{echo(key)} is not one lower-case letter or digit")
        elif key in RESERVED_KEYS:
            problems.add(
                f"{at}.key",
                f"{echo(key)} is reserved ({''.join(sorted(RESERVED_KEYS))} are the labelling "
                "page's own shortcuts and \"can't decide\")",
            )
        elif key in keys:
            problems.add(f"{at}.key", f"{echo(key)} is already the key of {keys[key]}")
        else:
            keys[key] = value
        requires = entry.get("requires_evidence", False)
        if not isinstance(requires, bool):
            problems.add(f"{at}.requires_evidence", "expected true or false")
            requires = False
        elif requires and value not in CITABLE:
            problems.add(
                f"{at}.requires_evidence",
                f"{value} cannot cite evidence; only {sorted(CITABLE)} can require it",
            )
            requires = False
        choices.append(LabelChoice(value, text, description, str(key), requires))
    if choices and all(c.value == vocabulary.EVIDENCE_UNAVAILABLE for c in choices):
        problems.add(field, f"offer at least one label besides {vocabulary.EVIDENCE_UNAVAILABLE}")
    return tuple(choices)


def _reasons(problems: Problems, given: Any, needed: bool) -> tuple[ReasonChoice, ...]:
    """Check the reason list; return the valid reasons (problems recorded)."""
    field = "unavailable_reasons"
    if not isinstance(given, list):
        problems.add(field, "expected a list of reasons")
        return ()
    reasons: list[ReasonChoice] = []
    for position, entry in enumerate(given):
        at = f"{field}[{position}]"
        if not isinstance(entry, dict):
            problems.add(at, 'expected an object with "value" and optional "text"')
            continue
        unknown = sorted(set(entry) - REASON_KEYS)
        if unknown:
            problems.add(
                f"{at}.{unknown[0]}", f"unknown field; the fields are {sorted(REASON_KEYS)}"
            )
            continue
        value = entry.get("value")
        if not isinstance(value, str) or value not in REASONS:
            problems.add(f"{at}.value", f"{echo(value)} is not a reason; one of {list(REASONS)}")
            continue
        if any(r.value == value for r in reasons):
            problems.add(f"{at}.value", f"{value} is offered twice")
            continue
        text = _text(
            problems,
            f"{at}.text",
            entry,
            "text",
            limit=MAX_REASON_TEXT_LENGTH,
            default=DEFAULT_REASON_TEXTS[value],
            required=True,
        )
        reasons.append(ReasonChoice(value, text))
    if needed and not reasons and not given:
        problems.add(
            field,
            f"{vocabulary.EVIDENCE_UNAVAILABLE} is offered: give at least one reason, "
            f"from {list(REASONS)}",
        )
    return tuple(reasons)


def _scale(problems: Problems, level: Level, given: Any, labels: tuple[LabelChoice, ...]) -> str:
    """Check one label set's declared scale against its labels (absent: nominal)."""
    field = SCALE_FIELDS[level]
    if given not in LabelScale.values:
        problems.add(
            field,
            f"expected one of {', '.join(LabelScale.values)}, "
            f"got {'null' if given is None else echo(given)}",
        )
        return LabelScale.NOMINAL.value
    problem = scale_problem(given, [c.value for c in labels])
    if problem:
        problems.add(field, f"the {level} {problem}")
    return str(given)


def policy_description_check(data: Any) -> PolicyDescription:
    """Validate a full label policy description; return it normalised.

    Args:
        data: A mapping ``{"evidence_relation", "guideline", "answer_labels", "claim_labels",
            "unavailable_reasons"}`` (every key required), where ``answer_labels`` and
            ``claim_labels`` are lists of ``{"value", "text"?, "description"?, "key"?}`` (claim
            labels also ``"requires_evidence"?``, default false) and ``unavailable_reasons``
            a list of ``{"value", "text"?}``. Absent texts, descriptions and keys take the
            defaults (key: 1-based position). Texts are stripped.

    Rules: label values from the fixed schema of their level, each once, at least one label
    besides ``evidence_unavailable``; display text 1 to 60 characters; description at most
    1000; keys one lower-case letter or digit, unique within the level, none of the reserved
    keys (``0``, ``j``, ``k``, ``c``, ``b``, ``s``); only ``supported``, ``contradicted`` and
    ``not_supported`` may require evidence; reasons from ``not_found``, ``blocked``,
    ``source_changed``, each once, at least one when a level offers ``evidence_unavailable``;
    guideline at most 100 000 characters, no control characters but tab and newline; the gold
    rule (optional keys, defaults ``GOLD_RULE_DEFAULTS``): ``gold_rate`` and
    ``qualification_threshold`` numbers from 0 to 1, ``qualification_required`` a boolean,
    ``qualification_items`` an integer from 1 to 1000; the scales (optional keys
    ``answer_scale``, ``claim_scale``, default ``nominal``) one of ``nominal``, ``ordinal``
    (the labels ranked in their listed order, lowest first), ``interval`` or ``ratio``, whose
    labels must all be numbers (ratio: none negative).

    Raises:
        InvalidInput: naming the first problem's field (e.g. ``claim_labels[2].key``);
            ``data["errors"]`` lists every problem as ``{"field", "reason"}``.
    """
    problems = Problems()
    if not isinstance(data, Mapping):
        problems.add("policy", "expected an object")
        problems.raise_any()
    known = TOP_KEYS | set(GOLD_RULE_DEFAULTS) | set(SCALE_FIELDS.values())
    for name in sorted(set(data) - known, key=str):
        problems.add(str(name), f"unknown field; the fields are {sorted(known)}")
    for name in sorted(TOP_KEYS - set(data)):
        problems.add(name, "this field is required")
    problems.raise_any()
    relation = data["evidence_relation"]
    if relation not in EvidenceRelation.values:
        problems.add(
            "evidence_relation", f"{echo(relation)} is not one of {EvidenceRelation.values}"
        )
    guideline = data["guideline"]
    if not isinstance(guideline, str):
        problems.add("guideline", "expected Markdown text")
        guideline = ""
    elif len(guideline) > MAX_GUIDELINE_LENGTH:
        problems.add("guideline", f"at most {MAX_GUIDELINE_LENGTH} characters")
    elif _CONTROL.search(guideline.replace("\r", "")):
        problems.add("guideline", "contains a control character")
    answer = _labels(problems, "answer", data["answer_labels"])
    claim = _labels(problems, "claim", data["claim_labels"])
    offered = {c.value for c in (*answer, *claim)}
    reasons = _reasons(
        problems, data["unavailable_reasons"], vocabulary.EVIDENCE_UNAVAILABLE in offered
    )
    rule = _gold_rule(problems, data)
    nominal = LabelScale.NOMINAL.value
    answer_scale = _scale(problems, "answer", data.get("answer_scale", nominal), answer)
    claim_scale = _scale(problems, "claim", data.get("claim_scale", nominal), claim)
    problems.raise_any()
    return PolicyDescription(
        evidence_relation=str(relation),
        guideline=guideline.replace("\r\n", "\n"),
        answer_labels=answer,
        claim_labels=claim,
        unavailable_reasons=reasons,
        **rule,
        answer_scale=answer_scale,
        claim_scale=claim_scale,
    )


def _share(problems: Problems, name: str, value: Any) -> float:
    """A number in [0, 1] (not a boolean), else a problem and the default."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        problems.add(name, f"expected a number from 0 to 1, got {echo(value)}")
        return float(GOLD_RULE_DEFAULTS[name])
    return float(value)


def _gold_rule(problems: Problems, data: Mapping[str, Any]) -> dict[str, Any]:
    """Check the gold rule's fields of a description (absent ones take the defaults)."""
    given = {name: data.get(name, default) for name, default in GOLD_RULE_DEFAULTS.items()}
    required = given["qualification_required"]
    if not isinstance(required, bool):
        problems.add("qualification_required", f"expected true or false, got {echo(required)}")
        required = False
    items = given["qualification_items"]
    if isinstance(items, bool) or not isinstance(items, int):
        problems.add("qualification_items", f"expected an integer, got {echo(items)}")
        items = GOLD_RULE_DEFAULTS["qualification_items"]
    elif not 1 <= items <= MAX_QUALIFICATION_ITEMS:
        problems.add(
            "qualification_items", f"must be between 1 and {MAX_QUALIFICATION_ITEMS}, got {items}"
        )
    return {
        "gold_rate": _share(problems, "gold_rate", given["gold_rate"]),
        "qualification_required": required,
        "qualification_items": items,
        "qualification_threshold": _share(
            problems, "qualification_threshold", given["qualification_threshold"]
        ),
    }


@transaction.atomic
def policy_update(*, project: Project, actor: Any, description: Any) -> LabelPolicy:
    """Replace the draft label policy of ``project`` with ``description`` (managers only).

    The draft is the project's newest policy version while it is not frozen (labelling has
    not started on it). The whole description is given (see :func:`policy_description_check`).
    A change of a label set's scale or order marks the agreement figures stale.

    Raises:
        PermissionDenied: ``actor`` is not a manager of the project (``actor=None``, the
            command line, is allowed).
        InvalidInput: the description is invalid (naming the field).
        InvalidTransition: the newest version is frozen (labelling started): a frozen version
            never changes; a new version has to be published instead.

    Concurrency: opens its own transaction and locks the project row, as starting labelling
    does, so an edit and the freeze never interleave.
    """
    permissions.require_role(
        project=project, actor=actor, roles=permissions.MANAGERS, outsider=PermissionDenied
    )
    project_label_writes_lock(project.pk)
    project_lock(project.pk)
    policy = project.policies.order_by("-version").first()
    if policy is None:
        raise InvalidTransition(f"project {project.slug!r} has no label policy")
    if policy.frozen_at is not None:
        # Said before the description is checked: no edit of it could be accepted.
        raise InvalidTransition(
            f"label policy v{policy.version} is frozen since {policy.frozen_at:%Y-%m-%d %H:%M} "
            "UTC (labelling started): it can no longer be edited; publish a new version instead",
            code=ErrorCode.POLICY_FROZEN,
        )
    checked = policy_description_check(description)
    fields = checked.model_fields()
    before = [getattr(policy, name) for name in AGREEMENT_FIELDS]
    for name, value in fields.items():
        setattr(policy, name, value)
    policy.save(update_fields=list(fields))
    if [getattr(policy, name) for name in AGREEMENT_FIELDS] != before:
        # Imported votes may already count under the draft: their alpha takes the new metric.
        derived_mark(project_id=project.pk, kinds=[DerivedKind.AGREEMENT])
    logger.info(
        "policy.updated",
        extra={
            "project_id": project.pk,
            "policy_version": policy.version,
            "actor_id": getattr(actor, "pk", None),
        },
    )
    return policy
