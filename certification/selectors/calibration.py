"""Calibration selectors: specs, runs, their reports, and the inputs snapshot of a run."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from django.db.models import Exists, Max, OuterRef, QuerySet, Subquery

from certification.certificates.apply import certificate_methods
from certification.certificates.version import STATS_VERSION
from certification.contract import inputs_sha256, spec_content
from certification.exceptions import (
    RunNotFound,
    SpecNotFound,
)
from certification.models import (
    AnswerField,
    CalibrationRun,
    CalibrationSpec,
    Loss,
    RunTrigger,
)
from labeling import vocabulary
from labeling.models import (
    CandidateAnswer,
    EvaluatorLabel,
    ItemStatus,
    Partition,
    Project,
    Question,
    Resolution,
    ResolutionStatus,
    ResolvedClaimLabel,
)

#: Candidate fields a spec may name as its acceptance score.
CANDIDATE_SCORE_FIELDS = ("acceptance_score", "confidence", "retrieval_score", "frequency_rank")
#: Float candidate fields a ``candidate_field`` loss may name, besides ``metadata.<key>``.
LOSS_CANDIDATE_FIELDS = ("acceptance_score", "confidence", "retrieval_score")
#: Prefix of a ``candidate_field`` loss read from the candidate's imported metadata.
LOSS_METADATA_PREFIX = "metadata."
#: Prefix of an evaluator score field: ``evaluator:<name>@<version>``.
EVALUATOR_PREFIX = "evaluator:"
#: The outcome of a candidate whose item is not resolved yet.
PENDING = vocabulary.PENDING
#: The outcome of an item resolved as ``unresolved``.
UNRESOLVED = ResolutionStatus.UNRESOLVED.value
#: Version of the inputs snapshot layout (part of the run's input hash).
INPUTS_SCHEMA = 2


def parse_evaluator_field(score_field: str) -> tuple[str, str] | None:
    """Split ``evaluator:<name>@<version>`` at the last ``@``; None for any other field."""
    if not score_field.startswith(EVALUATOR_PREFIX):
        return None
    name, at, version = score_field[len(EVALUATOR_PREFIX) :].rpartition("@")
    if not at or not name or not version:
        return None
    return name, version


def calibration_spec_list(*, project: Project) -> QuerySet[CalibrationSpec]:
    """Return the project's specs (every version), newest chains first, with their latest run.

    Each spec carries ``latest_run_id``, ``latest_run_status`` and ``latest_run_outcome``
    annotations (None before its first run) and ``has_next`` (a newer version exists). One
    query.
    """
    latest = CalibrationRun.objects.filter(spec=OuterRef("pk")).order_by("-created_at", "-pk")
    return (
        CalibrationSpec.objects.filter(project=project)
        .select_related("created_by", "next_version")
        .annotate(
            latest_run_id=Subquery(latest.values("pk")[:1]),
            latest_run_status=Subquery(latest.values("status")[:1]),
            latest_run_outcome=Subquery(latest.values("outcome")[:1]),
            has_next=Exists(CalibrationSpec.objects.filter(previous=OuterRef("pk"))),
        )
        .order_by("name", "-version")
    )


def calibration_spec_latest_list(*, project: Project) -> QuerySet[CalibrationSpec]:
    """Return the latest version of each spec chain of the project (no newer version)."""
    return CalibrationSpec.objects.filter(project=project, next_version__isnull=True).order_by("pk")


def calibration_spec_get(*, project: Project, spec_id: int) -> CalibrationSpec:
    """Return the spec ``spec_id`` of ``project`` (never another project's).

    Raises:
        SpecNotFound: no such spec in the project.
    """
    spec = (
        CalibrationSpec.objects.filter(project=project, pk=spec_id)
        .select_related("project", "previous", "created_by")
        .first()
    )
    if spec is None:
        raise SpecNotFound(f"no calibration spec {spec_id} in project {project.slug!r}")
    return spec


def calibration_spec_history(*, spec: CalibrationSpec) -> list[CalibrationSpec]:
    """Return the spec's chain of versions, oldest first.

    A chain shares its name (a new spec must take a new name; a revision keeps it), so the
    versions are the project's specs of that name. One query.
    """
    return list(
        CalibrationSpec.objects.filter(project_id=spec.project_id, name=spec.name).order_by(
            "version"
        )
    )


def _with_previous(runs: QuerySet[CalibrationRun]) -> QuerySet[CalibrationRun]:
    """Annotate runs with their spec's previous run (``has_previous``, ``previous_input_id``)."""
    earlier = CalibrationRun.objects.filter(
        spec_id=OuterRef("spec_id"), pk__lt=OuterRef("pk")
    ).order_by("-pk")
    return runs.annotate(
        has_previous=Exists(earlier), previous_input_id=Subquery(earlier.values("input_id")[:1])
    )


def calibration_run_trigger_text(run: CalibrationRun) -> str:
    """What started a run, in words (its ``trigger`` and, for a refresh, what changed).

    A refresh (trigger ``labels_changed``) requests a run whenever a spec's inputs hash
    changes, which is also the case for a spec's first run (the spec was just saved) and, on
    unchanged labels, for a new statistics version. The run before it (annotated by
    :func:`calibration_run_list` and :func:`calibration_run_get`) tells them apart: none, the
    same stored snapshot, or another one.
    """
    if run.trigger != RunTrigger.LABELS_CHANGED:
        return run.get_trigger_display()
    if not getattr(run, "has_previous", True):
        return "automatic: the spec was saved (its first run)"
    if getattr(run, "previous_input_id", None) == run.input_id:
        return "automatic: a new statistics version (same labels)"
    return "automatic: the resolved labels or scores it reads changed"


def calibration_run_list(
    *, project: Project, filters: Mapping[str, Any] | None = None
) -> QuerySet[CalibrationRun]:
    """Return the project's runs, newest first; ``filters`` may hold ``spec`` (a spec or id).

    The large ``inputs`` and ``result`` columns are deferred; each run carries what
    :func:`calibration_run_trigger_text` reads.
    """
    runs = _with_previous(
        CalibrationRun.objects.filter(project=project)
        .select_related("spec", "requested_by")
        .defer("result")
    )
    spec = (filters or {}).get("spec")
    if spec is not None:
        runs = runs.filter(spec=spec)
    return runs.order_by("-created_at", "-pk")


def calibration_run_get(*, project: Project, run_id: int) -> CalibrationRun:
    """Return the run ``run_id`` of ``project`` with its spec.

    Raises:
        RunNotFound: no such run in the project.
    """
    run = _with_previous(
        CalibrationRun.objects.filter(project=project, pk=run_id).select_related(
            "spec", "spec__project", "requested_by"
        )
    ).first()
    if run is None:
        raise RunNotFound(f"no calibration run {run_id} in project {project.slug!r}")
    return run


def calibration_run_latest(*, spec: CalibrationSpec) -> CalibrationRun | None:
    """Return the spec's most recent run (any status), or None."""
    return (
        CalibrationRun.objects.filter(spec=spec)
        .defer("result")
        .order_by("-created_at", "-pk")
        .first()
    )


def _outcome(status: str, resolution_status: str | None, answer_label: str | None) -> str:
    if status != ItemStatus.RESOLVED or resolution_status is None:
        return PENDING
    if resolution_status == UNRESOLVED:
        return UNRESOLVED
    return answer_label or UNRESOLVED


def _loss_column(spec: CalibrationSpec) -> str | None:
    """The candidate column a ``candidate_field`` loss reads, or None for the other losses."""
    if spec.loss != Loss.CANDIDATE_FIELD:
        return None
    return "metadata" if spec.loss_field.startswith(LOSS_METADATA_PREFIX) else spec.loss_field


def _loss_value(field: str, raw: Any) -> Any:
    """The loss field's raw value (a metadata key's value, None when absent), unchecked."""
    if field.startswith(LOSS_METADATA_PREFIX):
        metadata = raw if isinstance(raw, dict) else {}
        return metadata.get(field[len(LOSS_METADATA_PREFIX) :])
    return raw


def _score_column(spec: CalibrationSpec, candidate_ids: list[int]) -> dict[int, float | None]:
    """The spec's score per candidate id (None when missing or the evaluator was unavailable)."""
    evaluator = parse_evaluator_field(spec.score_field)
    if evaluator is None:
        return {}
    name, version = evaluator
    scores: dict[int, float | None] = {}
    rows = EvaluatorLabel.objects.filter(
        evaluator__project_id=spec.project_id,
        evaluator__name=name,
        evaluator__version=version,
        claim__isnull=True,
        candidate_id__in=candidate_ids,
    ).values_list("candidate_id", "score", "available")
    for candidate_id, score, available in rows:
        scores[candidate_id] = float(score) if available and score is not None else None
    return scores


def calibration_inputs(*, spec: CalibrationSpec) -> dict[str, Any]:
    """Return the snapshot a run of ``spec`` computes from: plain JSON data, deterministic.

    Layout (``schema`` 2)::

        {"schema": 2, "project": slug, "calibration_partition": "calibration" | "dev",
         "score_field": ..., "answer_field": ..., "policy_version": int | None,
         "policy_versions": {"calibration": {"1": n, ...}, "test": {...}},
         "mixed_policy_versions": bool,
         "partition_seed": int | None, "partition_frozen_at": iso | None,
         "calibration": [question, ...], "test": [question, ...]}

    A question is ``{"id", "external_id", "group", "slices", "candidates": [...]}`` (questions
    by id, candidates by sample index); a candidate is ``{"id", "item", "sample", "answer",
    "selected", "score", "R", "C", "outcome", "resolution", "claims"}`` where ``answer`` is the
    spec's answer field (None = no answer), ``score`` the spec's score field (None = missing),
    ``R``/``C`` the retrieval score and confidence, ``outcome`` the current resolved answer
    label, ``"unresolved"`` or ``"pending"`` (item not resolved yet), ``resolution`` the id of
    the current resolution, ``policy_version`` the label policy version it was made under (None
    while pending) and ``claims`` its claim-label counts (``{label: count}``). A spec whose loss
    is a candidate field (``loss: {"kind": "bounded", "source": "candidate_field", ...}``) adds
    ``loss_value`` to each candidate: that field's value as imported (None when absent), checked
    to be a number in [0, 1] when the run computes.

    ``policy_version`` is the project's current labelling policy version; ``policy_versions``
    counts the resolved candidates of each section per version they were resolved under, and
    ``mixed_policy_versions`` flags a section holding more than one: the runs compute over
    them as they are, and the guarantee ledger states the versions and counts (items returned
    for labelling under the new version when it was published are resolved under it).

    Gold items (status ``gold``) are left out: they check annotators and are never certified.
    Only the calibration partition named by the spec and the test partition are read. Queries:
    four (questions, candidates with their items and resolutions, claim-label counts, and the
    evaluator scores when the score field names an evaluator).
    """
    project = spec.project
    partitions = (spec.partition, Partition.TEST)
    questions = list(
        Question.objects.filter(project=project, partition__in=partitions)
        .order_by("pk")
        .values("id", "external_id", "group_key", "partition", "slices")
    )
    score_field = spec.score_field
    columns = [
        "id",
        "question_id",
        "sample_index",
        "is_selected",
        "retrieval_score",
        "confidence",
        "item__id",
        "item__status",
        "item__resolution_id",
        "item__resolution__status",
        "item__resolution__answer_label",
        "item__resolution__policy__version",
    ]
    answer_column = "text" if spec.answer_field == AnswerField.TEXT else "canonical_form"
    columns.append(answer_column)
    if score_field in CANDIDATE_SCORE_FIELDS and score_field not in columns:
        columns.append(score_field)
    loss_column = _loss_column(spec)
    if loss_column is not None and loss_column not in columns:
        columns.append(loss_column)
    candidates = list(
        CandidateAnswer.objects.filter(
            question__project=project, question__partition__in=partitions
        )
        # Gold items check annotators; they are no part of what is certified.
        .exclude(item__status=ItemStatus.GOLD)
        .order_by("question_id", "sample_index")
        .values(*columns)
    )
    resolution_ids = [c["item__resolution_id"] for c in candidates if c["item__resolution_id"]]
    claim_counts: dict[int, dict[str, int]] = defaultdict(dict)
    for counted_id, label in ResolvedClaimLabel.objects.filter(
        resolution_id__in=resolution_ids
    ).values_list("resolution_id", "label"):
        counts = claim_counts[counted_id]
        counts[label] = counts.get(label, 0) + 1
    evaluator_scores = _score_column(spec, [c["id"] for c in candidates])

    by_question: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for c in candidates:
        outcome = _outcome(
            c["item__status"], c["item__resolution__status"], c["item__resolution__answer_label"]
        )
        if score_field in CANDIDATE_SCORE_FIELDS:
            raw = c[score_field]
            score = None if raw is None else float(raw)
        else:
            score = evaluator_scores.get(c["id"])
        resolution_id = c["item__resolution_id"] if outcome != PENDING else None
        version = c["item__resolution__policy__version"] if resolution_id else None
        entry: dict[str, Any] = {
            "id": c["id"],
            "item": c["item__id"],
            "sample": c["sample_index"],
            "answer": c[answer_column],
            "selected": c["is_selected"],
            "score": score,
            "R": c["retrieval_score"],
            "C": c["confidence"],
            "outcome": outcome,
            "resolution": resolution_id,
            "policy_version": version,
            "claims": dict(sorted(claim_counts.get(resolution_id, {}).items()))
            if resolution_id
            else {},
        }
        if loss_column is not None:
            entry["loss_value"] = _loss_value(spec.loss_field, c[loss_column])
        by_question[c["question_id"]].append(entry)
    sections: dict[str, list[dict[str, Any]]] = {"calibration": [], "test": []}
    for q in questions:
        key = "test" if q["partition"] == Partition.TEST else "calibration"
        sections[key].append(
            {
                "id": q["id"],
                "external_id": q["external_id"],
                "group": q["group_key"] or "",
                "slices": q["slices"] or {},
                "candidates": by_question.get(q["id"], []),
            }
        )
    # Resolved labels per policy version and section: never pooled silently.
    versions: dict[str, dict[str, int]] = {}
    for section, entries in sections.items():
        counted: dict[int, int] = defaultdict(int)
        for question in entries:
            for candidate in question["candidates"]:
                if candidate["policy_version"] is not None:
                    counted[candidate["policy_version"]] += 1
        versions[section] = {str(v): counted[v] for v in sorted(counted)}
    policy = project.policies.filter(frozen_at__isnull=False).order_by("-version").first()
    return {
        "schema": INPUTS_SCHEMA,
        "project": project.slug,
        "calibration_partition": spec.partition,
        "score_field": score_field,
        "answer_field": spec.answer_field,
        "policy_version": policy.version if policy else None,
        "policy_versions": versions,
        "mixed_policy_versions": any(len(counted) > 1 for counted in versions.values()),
        "partition_seed": project.partition_seed,
        "partition_frozen_at": project.partition_frozen_at.isoformat()
        if project.partition_frozen_at
        else None,
        "calibration": sections["calibration"],
        "test": sections["test"],
    }


def calibration_spec_json(spec: CalibrationSpec) -> dict[str, Any]:
    """A spec as JSON primitives: identity, links, hash and the contract."""
    return {
        "id": spec.pk,
        "name": spec.name,
        "version": spec.version,
        "previous": spec.previous_id,
        "content_sha256": spec.content_sha256,
        "loss_unit": spec.loss_unit,
        "created_at": spec.created_at.isoformat() if spec.created_at else None,
        "created_by": spec.created_by.get_username() if spec.created_by is not None else None,
        **spec_content(spec),
    }


def calibration_run_freshness(*, run: CalibrationRun) -> dict[str, Any]:
    """Whether newer inputs have superseded a run: its input hash against the current inputs'.

    The current inputs are what a run of the spec would read now (:func:`calibration_inputs`);
    their hash covers the spec and this server's statistics version too
    (:func:`certification.contract.inputs_sha256`), so a run is superseded when labels,
    evaluator scores or the partitions it reads changed since, or when it was computed by
    another statistics version. Queries: the four of :func:`calibration_inputs` and, when
    superseded, two (the newer resolutions' latest time, the run of the current inputs).
    Returns ``superseded``; ``reason`` (None when current); ``current_input_sha256``;
    ``changed_at`` (ISO time of the latest resolution the run did not read, None when none:
    e.g. items returned for labelling, or another statistics version); and ``newer_run``
    (``{id, status, created_at}`` of a run of the current inputs, None when none was requested).
    """
    current = calibration_inputs(spec=run.spec)
    digest = inputs_sha256(spec_sha=run.spec_sha256, inputs=current)
    freshness: dict[str, Any] = {
        "superseded": digest != run.input_sha256,
        "reason": None,
        "current_input_sha256": digest,
        "changed_at": None,
        "newer_run": None,
    }
    if not freshness["superseded"]:
        return freshness
    if run.stats_version != STATS_VERSION:
        freshness["reason"] = (
            f"computed by statistics version {run.stats_version}; this server computes "
            f"version {STATS_VERSION}"
        )
    else:
        freshness["reason"] = "the labels or scores it reads changed since it was requested"

    def resolutions(inputs: Mapping[str, Any]) -> set[int]:
        return {
            c["resolution"]
            for key in ("calibration", "test")
            for q in inputs[key]
            for c in q["candidates"]
            if c["resolution"] is not None
        }

    newer = resolutions(current) - resolutions(run.inputs)
    latest = Resolution.objects.filter(pk__in=newer).aggregate(at=Max("created_at"))["at"]
    freshness["changed_at"] = latest.isoformat() if latest else None
    successor = (
        CalibrationRun.objects.filter(spec_id=run.spec_id, input_sha256=digest)
        .order_by("-created_at", "-pk")
        .values("pk", "status", "created_at")
        .first()
    )
    if successor is not None:
        freshness["newer_run"] = {
            "id": successor["pk"],
            "status": successor["status"],
            "created_at": successor["created_at"].isoformat(),
        }
    return freshness


def calibration_run_report(*, run: CalibrationRun, include_inputs: bool = False) -> dict[str, Any]:
    """The full report of a run as JSON primitives: what the API returns and ``certify`` prints.

    Keys: ``run`` (id, status, trigger and its words, times, hashes, statistics version and
    the server's, outcome, error), ``spec`` (see :func:`calibration_spec_json`), ``result``
    (the stored result, None until done; see ``certification.certificates``), ``methods``
    (per method of the spec, whether it certifies and why not, each applicable alone:
    ``certification.certificates.apply.certificate_methods``; None until done) and
    ``freshness`` (:func:`calibration_run_freshness`). ``inputs`` (the per-item snapshot,
    which holds evaluator scores per candidate) only when ``include_inputs`` is set: the caller
    decides who may see it (managers).
    """
    spec = run.spec
    done = run.status == "done"
    report: dict[str, Any] = {
        "run": {
            "id": run.pk,
            "status": run.status,
            "trigger": run.trigger,
            "trigger_text": calibration_run_trigger_text(run),
            "requested_by": run.requested_by.get_username()
            if run.requested_by is not None
            else None,
            "created_at": run.created_at.isoformat() if run.created_at else None,
            "started_at": run.started_at.isoformat() if run.started_at else None,
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
            "attempts": run.attempts,
            "worker_lost": run.worker_lost,
            "spec_sha256": run.spec_sha256,
            "input_sha256": run.input_sha256,
            "stats_version": run.stats_version,
            "stats_version_current": STATS_VERSION,
            "outcome": run.outcome,
            "error": run.error or None,
        },
        "spec": calibration_spec_json(spec),
        "result": run.result if done else None,
        "methods": certificate_methods(run.result) if done else None,
        "freshness": calibration_run_freshness(run=run),
    }
    if include_inputs:
        report["inputs"] = run.inputs
    return report
