"""Calibration specs and runs: the frozen contract and its background computation.

A :class:`~certification.models.CalibrationSpec` is written before calibration and frozen once
a run uses it; a change is a new version linked to its predecessor
(:func:`calibration_spec_revise`).
A :class:`~certification.models.CalibrationRun` snapshots the inputs (resolved labels, scores,
answers) when it is requested, so its input hash says whether anything changed: requesting a
run of unchanged inputs returns the existing run (idempotent). The Celery task
``calibration_run_execute_task`` computes the result from the snapshot alone
(:func:`~certification.certificates.calibration_result_compute`).

Runs start on demand (:func:`calibration_run_start`, managers), from ``manage.py certify``, and
whenever labels are resolved in a partition a spec reads (the calibration kind of derived
results, marked when :func:`calibration_reads` says so -> :func:`calibration_runs_refresh`).
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from certification.certificates import STATS_VERSION
from certification.certificates.contract import BOUNDED_LOSS_SOURCES
from certification.contract import (
    SPEC_FIELDS,
    canonical_json,
    inputs_sha256,
    spec_content,
    spec_sha256,
)
from certification.exceptions import CertificationError, InvalidSpec, RunNotFound, SpecFrozen
from certification.locks import calibration_spec_lock
from certification.models import (
    LIVE_RUN_STATUSES,
    Acceptance,
    AnswerField,
    CalibrationInput,
    CalibrationMethod,
    CalibrationPartition,
    CalibrationRun,
    CalibrationSpec,
    CountAs,
    Denominator,
    Loss,
    Multiplicity,
    RunStatus,
    RunTrigger,
    Selector,
    TieRule,
    Utility,
)
from certification.selectors import (
    CANDIDATE_SCORE_FIELDS,
    EVALUATOR_PREFIX,
    LOSS_CANDIDATE_FIELDS,
    LOSS_METADATA_PREFIX,
    calibration_inputs,
    calibration_run_latest,
    calibration_spec_latest_list,
    parse_evaluator_field,
)
from certification.stats.canonical import canonicaliser_names
from certification.stats.errors import StatsError
from labeling import dispatch, engine
from labeling.derived import derived_mark
from labeling.exceptions import NotFound
from labeling.models import DerivedKind, Evaluator, Item, Partition, Project
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


# ---------------------------------------------------------------------------------------------
# The contract
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# Spec services
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------------------------


def _check_spec_hash(spec: CalibrationSpec) -> str:
    digest = spec_sha256(spec)
    if digest != spec.content_sha256:
        raise CertificationError(
            f"spec {spec} does not match its content hash (it was changed outside the services)",
            data={"spec": spec.pk},
        )
    return digest


CALIBRATION_RUN = "calibration_run"
#: A run a worker is still to compute (or computing).
LIVE_WORK = (RunStatus.PENDING, RunStatus.RUNNING)


def calibration_run_send(run_id: int) -> None:
    """Send a run's task to a worker (the engine's sender for calibration runs).

    The task is registered as ``CALIBRATION_RUN`` by ``certification.tasks``
    (:mod:`labeling.dispatch`).
    """
    dispatch.task(CALIBRATION_RUN).delay(run_id)


def calibration_run_work_kind() -> engine.WorkKind:
    """Calibration runs as the engine recovers them (registered in ``ready``)."""
    return engine.WorkKind(
        name=CALIBRATION_RUN,
        model=CalibrationRun,
        send=calibration_run_send,
        to_do=lambda: Q(status__in=LIVE_WORK),
        failed=lambda attempts: {
            "status": RunStatus.FAILED,
            "error": f"failed: its worker stopped {attempts} times; not started again",
        },
    )


#: The error of a lapsed run that a new request replaced.
REPLACED_ERROR = "replaced: its worker stopped (stale: no sign of life within the lapse)"


def _retire_stale(run: CalibrationRun) -> bool:
    """Mark a lapsed pending or running run failed (replaced); return whether it was lapsed."""
    if not engine.is_lapsed(run):
        return False
    CalibrationRun.objects.filter(pk=run.pk, status=run.status).update(
        status=RunStatus.FAILED, error=REPLACED_ERROR, finished_at=timezone.now(), lease_owner=""
    )
    logger.warning("calibration_run.replaced", extra={"run": run.pk, "status": run.status})
    return True


def calibration_input_store(inputs: Mapping[str, Any]) -> CalibrationInput:
    """Return the stored row of this input snapshot, storing it if it is new.

    A snapshot is stored once however many runs (of however many specs) read it: its key is the
    sha256 of its canonical JSON.

    Concurrency: the unique sha256 makes a concurrent duplicate fail; the loser reads the
    winner's row.
    """
    digest = hashlib.sha256(canonical_json(inputs).encode("utf-8")).hexdigest()
    found = CalibrationInput.objects.filter(sha256=digest).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            return CalibrationInput.objects.create(sha256=digest, snapshot=dict(inputs))
    except IntegrityError:
        return CalibrationInput.objects.get(sha256=digest)


def calibration_run_request(
    *,
    spec: CalibrationSpec,
    trigger: str,
    requested_by: Any = None,
    inputs: Mapping[str, Any] | None = None,
) -> CalibrationRun:
    """Return the run of ``spec`` on its current inputs, creating and enqueueing it if needed.

    Snapshots the inputs (:func:`certification.selectors.calibration_inputs`) and hashes them.
    A pending, running or done run with the same input hash is returned as is (idempotent); a
    pending or running run that lapsed (its worker stopped, or its task was lost:
    :func:`labeling.engine.is_lapsed`) is marked failed ("replaced: its
    worker stopped") and replaced. A new run is created ``pending``, its snapshot stored once
    per distinct snapshot (:func:`calibration_input_store`), and its execution enqueued after
    commit. No permission check: callers decide (the manager service, the label-change
    refresh, the management command). ``inputs`` may pass a snapshot the caller just read, to
    avoid reading it twice.

    Raises:
        CertificationError: the spec no longer matches its content hash.

    Concurrency: must run inside the caller's transaction (it is not atomic on its own; the
    services that call it are). Locks the spec row and reads it again, so an edit either
    commits before (the run certifies the edited spec) or waits and is refused as frozen. The
    partial unique constraint on (spec, input hash) makes a concurrent duplicate fail; the loser
    returns the winner's run.
    """
    # Read the spec again under its row lock (the write lock on SQLite): the caller's copy may
    # predate an edit that committed since, and a run must certify the spec as it now stands.
    spec = calibration_spec_lock(spec.pk)
    spec_sha = _check_spec_hash(spec)
    if inputs is None:
        inputs = calibration_inputs(spec=spec)
    digest = inputs_sha256(spec_sha=spec_sha, inputs=inputs)
    existing = CalibrationRun.objects.filter(
        spec=spec, input_sha256=digest, status__in=LIVE_RUN_STATUSES
    ).first()
    if existing is not None and not _retire_stale(existing):
        return existing
    stored = calibration_input_store(inputs)
    try:
        with transaction.atomic():
            run = CalibrationRun.objects.create(
                project_id=spec.project_id,
                spec=spec,
                trigger=trigger,
                requested_by=requested_by,
                spec_sha256=spec_sha,
                input_sha256=digest,
                stats_version=STATS_VERSION,
                input=stored,
                enqueued_at=timezone.now(),
            )
    except IntegrityError:
        return CalibrationRun.objects.get(
            spec=spec, input_sha256=digest, status__in=LIVE_RUN_STATUSES
        )
    engine.send(CALIBRATION_RUN, run.pk)
    logger.info(
        "calibration_run.requested",
        extra={"run": run.pk, "spec": spec.pk, "trigger": trigger, "input_sha256": digest},
    )
    return run


@transaction.atomic
def calibration_run_start(*, spec: CalibrationSpec, actor: Any) -> CalibrationRun:
    """Start a run of ``spec`` on demand (managers), or return the one on the same inputs.

    Returns:
        The run: new and pending (computed in the background after commit), or the existing
        pending, running or done run of the same inputs. A failed run is retried.

    Raises:
        NotFound: the actor is not a member of the project.
        PermissionDenied: the actor is not a manager.
        CertificationError: the spec no longer matches its content hash.

    Concurrency: opens its own transaction; see :func:`calibration_run_request`.
    """
    require_role(project=spec.project, actor=actor, roles=MANAGERS)
    return calibration_run_request(spec=spec, trigger=RunTrigger.MANUAL, requested_by=actor)


@transaction.atomic
def calibration_runs_refresh(*, project_id: int) -> list[CalibrationRun]:
    """Start a run for each latest spec version of the project whose inputs changed.

    The derived recomputation of the calibration kind: after labels are resolved in a partition
    a spec reads (:func:`calibration_reads`), a spec changed, or an evaluator its score field
    names got labels; spaced by its cost (``certification.services.derived``). A spec whose
    latest run (of any status) has the current input hash gets nothing new, so a refresh over
    unchanged labels writes nothing; a superseded spec version is never refreshed.

    Returns:
        The runs created (pending; their execution is enqueued after commit).

    Raises:
        NotFound: no project has this id.

    Concurrency: opens its own transaction; two concurrent refreshes create at most one run
    per (spec, inputs) (see :func:`calibration_run_request`).
    """
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        raise NotFound(f"project {project_id} does not exist")
    created = []
    for spec in calibration_spec_latest_list(project=project).select_related("project"):
        latest = calibration_run_latest(spec=spec)
        spec_sha = _check_spec_hash(spec)
        inputs = calibration_inputs(spec=spec)
        digest = inputs_sha256(spec_sha=spec_sha, inputs=inputs)
        if latest is not None and latest.input_sha256 == digest:
            continue
        run = calibration_run_request(spec=spec, trigger=RunTrigger.LABELS_CHANGED, inputs=inputs)
        if latest is None or run.pk != latest.pk:
            created.append(run)
    if created:
        logger.info(
            "calibration_runs.refreshed",
            extra={"project_id": project_id, "runs": [r.pk for r in created]},
        )
    return created


#: Item ids per query of :func:`calibration_reads` (below SQLite's bound on parameters).
READS_CHUNK = 500


def calibration_reads(
    project_id: int, item_ids: tuple[int, ...], evaluator_ids: tuple[int, ...]
) -> bool:
    """Whether a change of these items or evaluators is an input of a calibration refresh.

    The derived-results inputs test of the calibration kind (``labeling.derived``): called in
    the transaction that resolved, returned or made gold the items, or imported the evaluators'
    labels. A refresh reads, for the latest version of each spec, the questions of the spec's
    calibration partition and of the test partition (:func:`certification.selectors.
    calibration_inputs`) and, when its score field names an evaluator, that evaluator's scores.
    So a change is an input when an item's question lies in a partition a latest spec reads,
    or an evaluator is one a latest spec's score field names. A project without a spec, and a
    question outside every partition read (or not partitioned yet), mark nothing.

    Queries: one when the project has no spec; else one per :data:`READS_CHUNK` items
    (stopping at the first hit), and two for evaluators: in the size of the change, never of
    the project.
    """
    latest = CalibrationSpec.objects.filter(project_id=project_id, next_version__isnull=True)
    if len(item_ids) > READS_CHUNK and not latest.exists():
        return False  # a large change (a start, an import) of a project without a spec
    if evaluator_ids:
        named = {
            field
            for field in latest.values_list("score_field", flat=True)
            if parse_evaluator_field(field) is not None
        }
        if named:
            fields = {
                f"{EVALUATOR_PREFIX}{name}@{version}"
                for name, version in Evaluator.objects.filter(
                    project_id=project_id, pk__in=evaluator_ids
                ).values_list("name", "version")
            }
            if named & fields:
                return True
    partition = "candidate__question__partition"
    read = Exists(latest.filter(partition=OuterRef(partition))) | (
        Q(**{partition: Partition.TEST}) & Exists(latest)
    )
    for at in range(0, len(item_ids), READS_CHUNK):
        chunk = item_ids[at : at + READS_CHUNK]
        if Item.objects.filter(read, pk__in=chunk, project_id=project_id).exists():
            return True
    return False


def calibration_run_fail(
    *, run_id: int, error: str, lease_owner: str | None = None
) -> CalibrationRun:
    """Mark a pending or running run failed with ``error`` (a done run is left alone).

    With ``lease_owner``, only if this owner still holds the run's lease.

    Raises:
        RunNotFound: no run has this id.
    """
    rows = CalibrationRun.objects.filter(
        pk=run_id, status__in=(RunStatus.PENDING, RunStatus.RUNNING)
    )
    if lease_owner is not None:
        rows = rows.filter(lease_owner=lease_owner)
    rows.update(
        status=RunStatus.FAILED, error=error or "failed", finished_at=timezone.now(), lease_owner=""
    )
    run = CalibrationRun.objects.filter(pk=run_id).first()
    if run is None:
        raise RunNotFound(f"no calibration run {run_id}")
    logger.warning("calibration_run.failed", extra={"run": run_id, "error": error})
    return run


def calibration_run_execute(*, run_id: int, task_id: str | None = None) -> CalibrationRun:
    """Compute a pending run from its stored inputs and its spec; store the result.

    Idempotent: a run that is done, failed or held by a live worker elsewhere is returned
    unchanged. A statistics error (``StatsError``) or a certification error fails the run
    closed: status ``failed`` with the error text, and no certificate. While it computes, its
    lease's heartbeat is written (:class:`labeling.engine.Lease`).

    Args:
        run_id: the run.
        task_id: the Celery task's id (a retry of the same task takes its own lease back).

    Returns:
        The run, now done or failed (or as another worker left it).

    Raises:
        RunNotFound: no run has this id.

    Concurrency: the engine's claim lets exactly one worker compute, and counts the attempt;
    the computation runs outside any transaction; the result is written only while this
    worker still holds the lease, so a worker presumed dead writes nothing.
    """
    # The statistics (NumPy, SciPy) load with the first run computed, not with the web process.
    from certification.certificates.compute import calibration_result_compute

    run = CalibrationRun.objects.select_related("spec", "input").filter(pk=run_id).first()
    if run is None:
        raise RunNotFound(f"no calibration run {run_id}")
    me = engine.owner(task_id)
    attempt = engine.claim(
        CalibrationRun,
        run_id,
        lease_owner=me,
        when=Q(status__in=LIVE_WORK),
        cap=engine.max_attempts(),
        status=RunStatus.RUNNING,
        enqueued_at=None,
    )
    if attempt is None:
        return run
    try:
        if spec_sha256(run.spec) != run.spec_sha256:
            raise CertificationError("the spec changed after the run was requested")
        with engine.Lease(CalibrationRun, run_id, lease_owner=me):
            result = calibration_result_compute(contract=spec_content(run.spec), inputs=run.inputs)
    except (StatsError, CertificationError) as exc:
        return calibration_run_fail(run_id=run_id, error=str(exc), lease_owner=me)
    engine.release(
        CalibrationRun,
        run_id,
        lease_owner=me,
        status=RunStatus.DONE,
        result=result,
        outcome=result["outcome"][:64],
        finished_at=timezone.now(),
        error="",
    )
    run.refresh_from_db()
    logger.info(
        "calibration_run.done", extra={"run": run_id, "outcome": run.outcome, "status": run.status}
    )
    return run


def calibration_run_rebuild(*, run: CalibrationRun) -> bool:
    """Recompute a done run from its stored inputs and spec; return whether it is identical.

    Nothing is written: this is the check that every stored number can be rebuilt.
    """
    from certification.certificates.compute import calibration_result_compute

    if run.status != RunStatus.DONE:
        return False
    result = calibration_result_compute(contract=spec_content(run.spec), inputs=run.inputs)
    stored = canonical_json(run.result)
    return (
        canonical_json(result) == stored
        and inputs_sha256(spec_sha=run.spec_sha256, inputs=run.inputs) == run.input_sha256
    )
