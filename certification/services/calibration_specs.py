"""Calibration specs: the contract checked field by field, created, updated while unused, revised.

A :class:`~certification.models.CalibrationSpec` is written before calibration and frozen once
a run uses it; a change is a new version linked to its predecessor
(:func:`calibration_spec_revise`). :func:`spec_clean` checks a spec's fields and fills the
defaults (:data:`SPEC_DEFAULTS`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import IntegrityError, transaction

from certification.certificates.contract import BOUNDED_LOSS_SOURCES
from certification.contract import SPEC_FIELDS, spec_content, spec_sha256
from certification.exceptions import InvalidSpec, SpecFrozen
from certification.locks import calibration_spec_lock
from certification.models import (
    Acceptance,
    AnswerField,
    CalibrationMethod,
    CalibrationPartition,
    CalibrationRun,
    CalibrationSpec,
    CountAs,
    Denominator,
    Loss,
    Multiplicity,
    Selector,
    TieRule,
    Utility,
)
from certification.selectors import (
    CANDIDATE_SCORE_FIELDS,
    EVALUATOR_PREFIX,
    LOSS_CANDIDATE_FIELDS,
    LOSS_METADATA_PREFIX,
    parse_evaluator_field,
)
from certification.stats.canonical import canonicaliser_names
from labeling.derived import derived_mark
from labeling.models import DerivedKind, Evaluator, Project
from labeling.permissions import MANAGERS, require_role

logger = logging.getLogger(__name__)


#: Defaults of the optional fields (the model's defaults).
SPEC_DEFAULTS: dict[str, Any] = {
    "description": "",
    "loss": Loss.ANSWER_INADMISSIBLE.value,
    "denominator": Denominator.ACCEPTED_ANSWERS.value,
    "thresholds": [],
    "acceptance": Acceptance.GE.value,
    "score_field": "",
    "utility": Utility.ANSWER_RATE.value,
    "multiplicity": Multiplicity.BONFERRONI.value,
    "canonicaliser": "exact",
    "tie_rule": TieRule.CANONICAL_ASCENDING.value,
    "answer_field": AnswerField.CANONICAL_FORM.value,
    "stopping_delta": None,
    "partition": CalibrationPartition.CALIBRATION.value,
    "unresolved_as": CountAs.ERROR.value,
    "evidence_unavailable_as": CountAs.ERROR.value,
    "abstained_as": CountAs.ERROR.value,
    "pending_as": CountAs.EXCLUDE.value,
    "report_confidence": Decimal("0.95"),
    "seed": 0,
}
#: The 0/1 losses, named by a string in the contract (bounded losses are objects).
BINARY_LOSSES = (Loss.ANSWER_INADMISSIBLE.value, Loss.ANY_ERROR.value)
CHOICES: dict[str, tuple[str, ...]] = {
    "method": tuple(CalibrationMethod.values),
    "denominator": tuple(Denominator.values),
    "acceptance": tuple(Acceptance.values),
    "selector": tuple(Selector.values),
    "utility": tuple(Utility.values),
    "multiplicity": tuple(Multiplicity.values),
    "tie_rule": tuple(TieRule.values),
    "answer_field": tuple(AnswerField.values),
    "partition": tuple(CalibrationPartition.values),
    "unresolved_as": tuple(CountAs.values),
    "evidence_unavailable_as": tuple(CountAs.values),
    "abstained_as": tuple(CountAs.values),
    "pending_as": tuple(CountAs.values),
}
#: The largest threshold family a spec may declare.
MAX_THRESHOLDS = 10_000
MAX_NAME = 200
MAX_LOSS_FIELD = 300
MAX_DESCRIPTION = 10_000
#: Decimal places of alpha, delta, stopping delta and report confidence (the model's fields).
DECIMAL_PLACES = 8


def _choice(field: str, value: Any) -> str:
    if value not in CHOICES[field]:
        raise InvalidSpec(field, f"must be one of {', '.join(CHOICES[field])}, got {value!r}")
    return str(value)


def _level(field: str, value: Any, *, required: bool = True) -> Decimal | None:
    if value is None or value == "":
        if required:
            raise InvalidSpec(field, "is required (a number strictly between 0 and 1)")
        return None
    if isinstance(value, bool):
        raise InvalidSpec(field, f"must be a number strictly between 0 and 1, got {value!r}")
    try:
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise InvalidSpec(
            field, f"must be a number strictly between 0 and 1, got {value!r}"
        ) from None
    if not number.is_finite() or not (0 < number < 1):
        raise InvalidSpec(field, f"must lie strictly between 0 and 1, got {value!r}")
    if number != number.quantize(Decimal(1).scaleb(-DECIMAL_PLACES)):
        raise InvalidSpec(field, f"at most {DECIMAL_PLACES} decimal places, got {value!r}")
    return number.quantize(Decimal(1).scaleb(-DECIMAL_PLACES))


def _thresholds(value: Any) -> list[float]:
    if isinstance(value, str):
        parts = [p for p in value.replace(",", " ").split() if p]
        value = parts
    if not isinstance(value, list | tuple):
        raise InvalidSpec("thresholds", "must be a list of numbers")
    if len(value) > MAX_THRESHOLDS:
        raise InvalidSpec("thresholds", f"at most {MAX_THRESHOLDS} thresholds, got {len(value)}")
    family: list[float] = []
    for i, item in enumerate(value):
        if isinstance(item, bool):
            raise InvalidSpec(f"thresholds[{i}]", f"must be a number, got {item!r}")
        try:
            number = float(item)
        except (TypeError, ValueError):
            raise InvalidSpec(f"thresholds[{i}]", f"must be a number, got {item!r}") from None
        if not math.isfinite(number):
            raise InvalidSpec(f"thresholds[{i}]", f"must be finite, got {item!r}")
        if number in family:
            raise InvalidSpec(
                f"thresholds[{i}]", f"{number!r} is listed twice (each threshold counts in M once)"
            )
        family.append(number)
    return family


def _loss(value: Any, method: str) -> tuple[str, str]:
    """The ``loss`` and ``loss_field`` columns of a contract's ``loss`` (a name or an object)."""
    if isinstance(value, str) and value in BINARY_LOSSES:
        return value, ""
    if not isinstance(value, Mapping):
        raise InvalidSpec(
            "loss",
            f"must be one of {', '.join(BINARY_LOSSES)} (0/1 losses) or a bounded loss "
            '{"kind": "bounded", "source": ...}, got ' + repr(value),
        )
    unknown = sorted(set(value) - {"kind", "source", "field"}, key=str)
    if unknown:
        raise InvalidSpec(f"loss.{unknown[0]}", "is not a field of a bounded loss")
    if value.get("kind") != "bounded":
        raise InvalidSpec("loss.kind", f"must be 'bounded', got {value.get('kind')!r}")
    source = value.get("source")
    if source not in BOUNDED_LOSS_SOURCES:
        raise InvalidSpec(
            "loss.source", f"must be one of {', '.join(BOUNDED_LOSS_SOURCES)}, got {source!r}"
        )
    if method != CalibrationMethod.SELECTIVE_RISK:
        raise InvalidSpec(
            "loss",
            "a bounded loss is certified by selective risk only (method selective_risk): "
            "conformal sets need an admissible/inadmissible answer",
        )
    field = value.get("field")
    if source != Loss.CANDIDATE_FIELD:
        if field is not None:
            raise InvalidSpec(
                "loss.field", f"a candidate field is only for the candidate_field source ({source})"
            )
        return source, ""
    text = field.strip() if isinstance(field, str) else ""
    key = text[len(LOSS_METADATA_PREFIX) :] if text.startswith(LOSS_METADATA_PREFIX) else ""
    if not (text in LOSS_CANDIDATE_FIELDS or key.strip()):
        raise InvalidSpec(
            "loss.field",
            f"the candidate field must be one of {', '.join(LOSS_CANDIDATE_FIELDS)} or "
            f"'metadata.<key>' (a number in [0, 1] of each candidate), got {field!r}",
        )
    if len(text) > MAX_LOSS_FIELD:
        raise InvalidSpec("loss.field", f"the candidate field: at most {MAX_LOSS_FIELD} characters")
    return source, text


def _score_field(project: Project, value: Any) -> str:
    text = "" if value is None else str(value).strip()
    if text in CANDIDATE_SCORE_FIELDS:
        return text
    evaluator = parse_evaluator_field(text)
    if evaluator is None:
        raise InvalidSpec(
            "score_field",
            f"must be one of {', '.join(CANDIDATE_SCORE_FIELDS)} or "
            f"'{EVALUATOR_PREFIX}<name>@<version>', got {text!r}",
        )
    name, version = evaluator
    if not Evaluator.objects.filter(project=project, name=name, version=version).exists():
        raise InvalidSpec("score_field", f"no evaluator {name}@{version} in this project")
    return text


def spec_clean(*, project: Project, data: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a spec's fields; return them cleaned (defaults filled in).

    Rules: ``method`` and ``selector`` are required; every choice field takes one of its
    values; ``loss`` is ``answer_inadmissible`` or ``any_error`` (0/1) or, for selective risk
    only, a bounded loss ``{"kind": "bounded", "source": "unsupported_claim_share"}`` or
    ``{"kind": "bounded", "source": "candidate_field", "field": <a float candidate field or
    metadata.<key>>}``; ``alpha``, ``delta``, ``report_confidence`` and ``stopping_delta``
    (optional) lie strictly between 0 and 1 with at most 8 decimal places; selective risk
    needs a non-empty family of distinct finite thresholds (at most 10,000) and a known score
    field (a candidate field, or ``evaluator:<name>@<version>`` of an evaluator of the
    project); a conformal set is per question, so it refuses the ``each_candidate`` selector;
    the canonicaliser is a registered name. Unknown keys are refused.

    Returns:
        The model's field values: the loss as its ``loss`` and ``loss_field`` columns.

    Raises:
        InvalidSpec: naming the first invalid field (``field``; ``loss.source``, ``loss.field``
            inside a bounded loss).
    """
    unknown = sorted(set(data) - set(SPEC_FIELDS))
    if unknown:
        raise InvalidSpec(unknown[0], "is not a calibration spec field")
    merged = {**SPEC_DEFAULTS, **{k: v for k, v in data.items()}}
    clean: dict[str, Any] = {}
    if merged.get("method") in (None, ""):
        raise InvalidSpec("method", "is required")
    for field in CHOICES:
        if field == "selector" and merged.get("selector") in (None, ""):
            raise InvalidSpec("selector", "is required")
        clean[field] = _choice(field, merged[field])
    clean["loss"], clean["loss_field"] = _loss(merged["loss"], clean["method"])
    clean["alpha"] = _level("alpha", merged.get("alpha"))
    clean["delta"] = _level("delta", merged.get("delta"))
    clean["report_confidence"] = _level("report_confidence", merged["report_confidence"])
    clean["stopping_delta"] = _level("stopping_delta", merged["stopping_delta"], required=False)
    description = merged["description"]
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        raise InvalidSpec("description", f"must be text of at most {MAX_DESCRIPTION} characters")
    clean["description"] = description.strip()
    seed = merged["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int | str):
        raise InvalidSpec("seed", f"must be an integer, got {seed!r}")
    try:
        clean["seed"] = int(seed)
    except ValueError:
        raise InvalidSpec("seed", f"must be an integer, got {seed!r}") from None
    if not (0 <= clean["seed"] < 2**63):
        raise InvalidSpec("seed", "must lie in [0, 2**63)")
    canonicaliser = merged["canonicaliser"]
    if canonicaliser not in canonicaliser_names():
        raise InvalidSpec(
            "canonicaliser",
            f"must be one of {', '.join(canonicaliser_names())}, got {canonicaliser!r}",
        )
    clean["canonicaliser"] = canonicaliser
    selective = clean["method"] in (CalibrationMethod.SELECTIVE_RISK, CalibrationMethod.BOTH)
    conformal = clean["method"] in (CalibrationMethod.CONFORMAL_SET, CalibrationMethod.BOTH)
    clean["thresholds"] = _thresholds(merged["thresholds"])
    if selective:
        if not clean["thresholds"]:
            raise InvalidSpec(
                "thresholds", "selective risk needs a non-empty threshold family (M >= 1)"
            )
        clean["score_field"] = _score_field(project, merged["score_field"])
    else:
        clean["score_field"] = str(merged["score_field"] or "").strip()
        if clean["score_field"]:
            clean["score_field"] = _score_field(project, clean["score_field"])
    if conformal and clean["selector"] == Selector.EACH_CANDIDATE:
        raise InvalidSpec(
            "selector",
            "a conformal prediction set is per question: choose mode, is_selected or first_sample",
        )
    return {**{key: clean[key] for key in SPEC_FIELDS}, "loss_field": clean["loss_field"]}


def _clean_name(name: Any) -> str:
    text = name.strip() if isinstance(name, str) else ""
    if not text:
        raise InvalidSpec("name", "is required")
    if len(text) > MAX_NAME:
        raise InvalidSpec("name", f"at most {MAX_NAME} characters")
    return text


def spec_is_used(spec: CalibrationSpec) -> bool:
    """Whether a run has used the spec (it is then frozen)."""
    return CalibrationRun.objects.filter(spec=spec).exists()


@transaction.atomic
def calibration_spec_create(
    *, project: Project, actor: Any, name: str, **fields: Any
) -> CalibrationSpec:
    """Write a new calibration spec (version 1 of a new chain).

    ``name`` is the chain's name, unique in the project; ``fields`` is the contract
    (:data:`SPEC_FIELDS`; see :func:`spec_clean`).

    Raises:
        NotFound: the actor is not a member of the project.
        PermissionDenied: the actor is not a manager.
        InvalidSpec: a field is invalid (named in ``field``), or the name is taken.

    Concurrency: opens its own transaction; the unique (project, name, version) constraint
    refuses a concurrent duplicate.
    """
    require_role(project=project, actor=actor, roles=MANAGERS)
    clean_name = _clean_name(name)
    clean = spec_clean(project=project, data=fields)
    if CalibrationSpec.objects.filter(project=project, name=clean_name).exists():
        raise InvalidSpec("name", f"a spec named {clean_name!r} exists: revise it instead")
    spec = CalibrationSpec(project=project, name=clean_name, version=1, created_by=actor, **clean)
    spec.content_sha256 = spec_sha256(spec)
    spec.full_clean()
    try:
        with transaction.atomic():
            spec.save()
    except IntegrityError:
        raise InvalidSpec(
            "name", f"a spec named {clean_name!r} exists: revise it instead"
        ) from None
    derived_mark(project_id=project.pk, kinds=[DerivedKind.CALIBRATION])
    logger.info(
        "calibration_spec.created",
        extra={"project": project.slug, "spec": spec.pk, "sha256": spec.content_sha256},
    )
    return spec


@transaction.atomic
def calibration_spec_update(*, spec: CalibrationSpec, actor: Any, **fields: Any) -> CalibrationSpec:
    """Change a spec in place, which only a spec no run has used (and not superseded) allows.

    ``fields`` are the fields to change; the others keep their values.

    Raises:
        NotFound, PermissionDenied: as :func:`calibration_spec_create`.
        SpecFrozen: a run has used the spec, or a newer version exists: revise it instead.
        InvalidSpec: a field is invalid.

    Concurrency: locks the spec row; a run requested concurrently waits for the edit, and an
    edit after a run refuses.
    """
    require_role(project=spec.project, actor=actor, roles=MANAGERS)
    locked = calibration_spec_lock(spec.pk)
    if spec_is_used(locked):
        raise SpecFrozen(
            f"spec {locked} is used by a run and cannot change: revise it to make a new version",
            data={"spec": locked.pk},
        )
    if CalibrationSpec.objects.filter(previous=locked).exists():
        raise SpecFrozen(f"spec {locked} has a newer version", data={"spec": locked.pk})
    current = spec_content(locked)
    current.update(fields)
    clean = spec_clean(project=locked.project, data=current)
    for key, value in clean.items():
        setattr(locked, key, value)
    locked.content_sha256 = spec_sha256(locked)
    locked.full_clean()
    locked.save()
    derived_mark(project_id=locked.project_id, kinds=[DerivedKind.CALIBRATION])
    return locked


@transaction.atomic
def calibration_spec_revise(*, spec: CalibrationSpec, actor: Any, **fields: Any) -> CalibrationSpec:
    """Make a new version of a spec: the old one stays frozen, the new one links to it.

    Fields not given keep the predecessor's values. A revision that changes nothing is still a
    new version (its content hash equals the predecessor's).

    Returns:
        The new spec (``version`` + 1, ``previous`` = ``spec``).

    Raises:
        NotFound, PermissionDenied: as :func:`calibration_spec_create`.
        SpecFrozen: ``spec`` already has a newer version (revise the latest one).
        InvalidSpec: a field is invalid.

    Concurrency: locks the predecessor's row; the one-to-one ``previous`` link refuses a
    second concurrent revision of the same version.
    """
    require_role(project=spec.project, actor=actor, roles=MANAGERS)
    locked = calibration_spec_lock(spec.pk)
    if CalibrationSpec.objects.filter(previous=locked).exists():
        raise SpecFrozen(
            f"spec {locked} already has a newer version: revise the latest one",
            data={"spec": locked.pk},
        )
    current = spec_content(locked)
    current.update(fields)
    clean = spec_clean(project=locked.project, data=current)
    new = CalibrationSpec(
        project=locked.project,
        name=locked.name,
        version=locked.version + 1,
        previous=locked,
        created_by=actor,
        **clean,
    )
    new.content_sha256 = spec_sha256(new)
    new.full_clean()
    try:
        with transaction.atomic():
            new.save()
    except IntegrityError:
        raise SpecFrozen(
            f"spec {locked} was revised concurrently", data={"spec": locked.pk}
        ) from None
    derived_mark(project_id=locked.project_id, kinds=[DerivedKind.CALIBRATION])
    logger.info(
        "calibration_spec.revised",
        extra={"spec": new.pk, "previous": locked.pk, "sha256": new.content_sha256},
    )
    return new
