"""Freezing releases, moving tags and requesting builds.

A release pins the database state it describes when it is frozen (see ``Release``): the largest
committed id of each append-only table it reads (exact for its project: see ``_cutoff``), and
a copy of the figures its report shows. The build (``certification.services.releases.build``)
then reads only that state.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction
from django.db.models import Max, Model
from django.utils import timezone

from certification.certificates.apply import certificate_methods, certificate_status
from certification.locks import release_freeze_lock
from certification.models import (
    RELEASE_VERSION_PATTERN,
    AgreementReport,
    AuditReport,
    BuildStatus,
    CalibrationRun,
    Release,
    ReleaseBuild,
    ReleaseTag,
    ReleaseTagMove,
    RunStatus,
    release_version_key,
)
from certification.selectors import calibration_run_test_decisions, release_default_run_ids
from certification.services.audit_anytime import audit_figure_kinds
from certification.services.releases.build import RELEASE_BUILD
from labeling import engine
from labeling.exceptions import Conflict, InvalidInput
from labeling.locks import project_lock
from labeling.models import (
    AnnotationRevision,
    CandidateAnswer,
    EvaluatorLabel,
    GoldReference,
    LabelPolicy,
    PriorAnnotation,
    Project,
    Resolution,
    SourceVersion,
)
from labeling.permissions import MANAGERS, require_role

# The append-only tables a release reads, by the key its cutoff uses. Rows inserted with the
# parent row (claim labels and evidence of a revision or resolution, claims of a candidate)
# follow their parent's cutoff.
CUTOFF_MODELS: dict[str, type[Model]] = {
    "annotation_revision": AnnotationRevision,
    "resolution": Resolution,
    "prior_annotation": PriorAnnotation,
    "evaluator_label": EvaluatorLabel,
    "candidate": CandidateAnswer,
    "source_version": SourceVersion,
    "label_policy": LabelPolicy,
    # Gold items are left out of a release: an item is gold as of the cutoff when it has a
    # reference with an id at most this (a release frozen before gold items has no such key).
    "gold_reference": GoldReference,
}
MAX_NOTES = 20_000
TAG_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def _clean_version(project: Project, version: Any, parent: Release | None) -> str:
    text = version.strip() if isinstance(version, str) else ""
    if not re.fullmatch(RELEASE_VERSION_PATTERN, text):
        raise InvalidInput(
            "version must be an increasing integer (e.g. 3) or a semantic version MAJOR.MINOR."
            "PATCH (e.g. 1.2.0)",
            field="version",
            prefix=False,
        )
    if Release.objects.filter(project=project, version=text).exists():
        raise InvalidInput(f"release {text} already exists", field="version", prefix=False)
    if parent is not None and release_version_key(text) <= release_version_key(parent.version):
        raise InvalidInput(
            f"version {text} must be greater than its parent's ({parent.version})",
            field="version",
            prefix=False,
        )
    return text


def _certified_runs(project: Project, run_ids: list[int] | None) -> list[CalibrationRun]:
    """The runs a release certifies: those named, or the latest done run of each latest spec."""
    if run_ids is None:
        run_ids = release_default_run_ids(project=project)
    runs = list(
        CalibrationRun.objects.filter(project=project, pk__in=run_ids).select_related("spec")
    )
    found = {run.pk for run in runs}
    for index, run_id in enumerate(run_ids):
        if run_id not in found:
            raise InvalidInput(
                f"no calibration run {run_id} in project {project.slug!r}",
                field=f"runs[{index}]",
                prefix=False,
            )
    for index, run in enumerate(runs):
        if run.status != RunStatus.DONE:
            raise InvalidInput(
                f"calibration run {run.pk} is {run.status}, not done: only a done run certifies",
                field=f"runs[{index}]",
                prefix=False,
            )
    return sorted(runs, key=lambda run: run.pk)


def certifies_json(run: CalibrationRun) -> dict[str, Any]:
    """What a release records of a run it names: spec and run identity, hashes and verdict.

    ``certified`` says whether the run certifies (each method of its spec found its operating
    point); when not, ``reason`` says why (e.g. "no certified operating point: ..."). ``methods``
    gives each method of the spec on its own (``{method: {certified, reason}}``): with method
    ``both``, one may certify while the other does not, and the one that certifies is applied
    alone.
    """
    spec = run.spec
    reason = certificate_status(run.result)
    return {
        "certified": reason is None,
        "reason": reason,
        "methods": certificate_methods(run.result),
        "spec": {
            "id": spec.pk,
            "name": spec.name,
            "version": spec.version,
            "content_sha256": spec.content_sha256,
        },
        "run": {
            "id": run.pk,
            "input_sha256": run.input_sha256,
            "spec_sha256": run.spec_sha256,
            "stats_version": run.stats_version,
            "outcome": run.outcome,
        },
    }


def _test_decisions(run: CalibrationRun) -> dict[str, Any]:
    """The run's certificate applied to its test questions, as a release keeps it.

    The certificate reference is given once (``certificate``) instead of in every record.
    """
    records = calibration_run_test_decisions(run=run)
    reference = records[0]["certificate"] if records else None
    return {
        "certificate": reference,
        "records": [{k: v for k, v in r.items() if k != "certificate"} for r in records],
    }


def _decisions_before_freeze(
    project: Project, run_ids: list[int] | None
) -> dict[int, dict[str, Any]]:
    """The test decisions of the runs a freeze will name, by run id, computed before its locks.

    A done run never changes, so its decisions (a pure function of its stored inputs, about a
    second per 25,000 questions) are computed here, while label writers still run; ids that
    turn out invalid are refused inside the freeze, and a default run that changed in between
    is computed there.
    """
    ids = release_default_run_ids(project=project) if run_ids is None else run_ids
    runs = CalibrationRun.objects.filter(
        project=project, pk__in=[i for i in ids if isinstance(i, int)], status=RunStatus.DONE
    ).select_related("spec", "input")
    return {run.pk: _test_decisions(run) for run in runs}


def _report_snapshot(
    project: Project, runs: list[CalibrationRun], decisions: dict[int, dict[str, Any]]
) -> dict[str, Any]:
    """Return the figures report.json shows, as they stand now.

    Stored computations are recomputed later, so the release keeps its own copy. Rater ids are
    replaced by pseudonyms at build.
    """
    agreement = AgreementReport.objects.filter(project=project).first()
    audits = (
        AuditReport.objects.filter(project=project)
        .select_related("evaluator")
        .order_by("evaluator__name", "evaluator__version")
    )
    return {
        "heldout": [
            {
                **certifies_json(run),
                "heldout": run.result.get("heldout"),
                "ledger": run.result.get("ledger"),
                "outcome": run.result.get("outcome"),
                "decisions": decisions[run.pk] if run.pk in decisions else _test_decisions(run),
            }
            for run in runs
        ],
        "agreement": None
        if agreement is None
        else {
            "input_sha256": agreement.input_sha256,
            "policy_version": agreement.policy_version,
            "answer": agreement.answer,
            "claim": agreement.claim,
            "versions": agreement.versions,
        },
        "audits": [
            {
                "evaluator": {"name": audit.evaluator.name, "version": audit.evaluator.version},
                "input_sha256": audit.input_sha256,
                **audit_figure_kinds(audit.result),
                "result": audit.result,
            }
            for audit in audits
        ],
    }


def _cutoff() -> dict[str, int]:
    """The largest committed id of each table a release reads, exact for the freezing project.

    The caller holds its project's label-write lock exclusive (``release_freeze_lock``): every
    label transaction of the project has ended, new ones wait for ours, and each takes its
    shared lock before its first row gets an id. A row of the project committed later therefore
    gets its id from a sequence after this read, larger than every id read here, so "the
    project's rows with id ≤ cutoff" (what the release's reader keeps) stays the state of this
    moment. Other projects' writers are not waited for: their rows may commit below the cutoff
    later, but the reader never reads another project's rows. One index lookup per table (the
    largest id of the project's own rows would need a join over all of them, 0.1-0.7 s per
    table at 20,000-200,000 candidates, while the project's writers wait). SQLite serialises
    writers anyway.
    """
    return {
        # _default_manager: the manager Django documents for code given any model class
        # (``objects`` is not declared on Model itself).
        key: model._default_manager.aggregate(largest=Max("pk"))["largest"] or 0
        for key, model in CUTOFF_MODELS.items()
    }


# The build task's hard time limit, in seconds (Celery kills the task then).
BUILD_TIME_LIMIT = 3660


def build_is_stale(build: ReleaseBuild) -> bool:
    """Whether a pending or running build lost its worker or its task (the engine's rule).

    See :func:`labeling.engine.is_lapsed`: held with no heartbeat for
    ``CERTLABEL_WORK_LAPSE_SECONDS``, or pending that long after its task was sent.
    """
    return build.status in (BuildStatus.PENDING, BuildStatus.RUNNING) and engine.is_lapsed(build)


def release_freeze(
    *,
    project: Project,
    actor: Any,
    version: str,
    parent: Release | None = None,
    run_ids: list[int] | None = None,
    notes: str = "",
) -> Release:
    """Freeze a release of ``project`` and enqueue its build.

    Args:
        project: the project; ``actor`` must be its manager.
        actor: the manager freezing the release (the command line passes its ``--user``).
        version: an increasing integer or MAJOR.MINOR.PATCH, new in the project and greater than
            ``parent``'s version.
        parent: the release this one follows or corrects (same project), or None.
        run_ids: the calibration runs it certifies (each done, of this project); None takes the
            latest done run of every latest spec version; ``[]`` certifies none.
        notes: free text shown on the page and in the dataset card.

    Returns:
        The release (its first build pending; ``release_build_task`` runs after commit).

    Raises:
        NotFound: ``actor`` is not a member of the project.
        PermissionDenied: ``actor`` is not a manager.
        InvalidInput: a bad version, parent, run or notes; ``field`` names the field.
    """
    require_role(project=project, actor=actor, roles=MANAGERS)
    if parent is not None and parent.project_id != project.pk:
        raise InvalidInput(
            f"release {parent.pk} is not a release of {project.slug!r}",
            field="parent",
            prefix=False,
        )
    if not isinstance(notes, str) or len(notes) > MAX_NOTES:
        raise InvalidInput(
            f"notes must be text of at most {MAX_NOTES} characters", field="notes", prefix=False
        )
    decisions = _decisions_before_freeze(project, run_ids)
    with transaction.atomic():
        # First the project's label-write lock, exclusive: it waits for the project's label
        # transactions in flight and holds its new ones until we commit; nothing of another
        # project is locked or waited for (certification/locks.py). Then the project row, NO
        # KEY: labelling transactions' rows pointing at the project still pass their checks.
        release_freeze_lock(project.pk)
        project = project_lock(project.pk, no_key=True)
        version = _clean_version(project, version, parent)
        runs = _certified_runs(project, run_ids)
        cutoff = _cutoff()
        policy = (
            LabelPolicy.objects.filter(project=project, pk__lte=cutoff["label_policy"])
            .order_by("-version")
            .first()
        )
        if policy is None:
            raise InvalidInput(
                f"project {project.slug!r} has no label policy", field="project", prefix=False
            )
        release = Release.objects.create(
            project=project,
            version=version,
            project_slug=project.slug,
            project_name=project.name,
            partition={
                "frozen": project.partition_frozen_at is not None,
                "seed": project.partition_seed,
                "proportions": project.partition_proportions,
            },
            parent=parent,
            policy=policy,
            certifies=[certifies_json(run) for run in runs],
            cutoff=cutoff,
            report=_report_snapshot(project, runs, decisions),
            notes=notes,
            created_by=actor,
        )
        build = ReleaseBuild.objects.create(release=release, requested_by=actor)
        engine.send(RELEASE_BUILD, build.pk)
    return release


def release_rebuild(*, release: Release, actor: Any) -> ReleaseBuild:
    """Request a rebuild of ``release``: built again elsewhere and compared byte by byte.

    When the release's first build failed, or its worker died (:func:`build_is_stale`: no
    heartbeat, or its task lost, for ``CERTLABEL_WORK_LAPSE_SECONDS``), that build is started
    again instead of answering that there is nothing to compare with; a lapsed rebuild is
    marked failed so that a new one can start.

    Raises:
        NotFound / PermissionDenied: ``actor`` is not a manager of the release's project.
        Conflict: the release has no done first build yet, or a rebuild is already running.
    """
    require_role(project=release.project, actor=actor, roles=MANAGERS)
    with transaction.atomic():
        project_lock(release.project_id)
        first = ReleaseBuild.objects.filter(release=release, is_rebuild=False).first()
        if first is not None and (first.status == BuildStatus.FAILED or build_is_stale(first)):
            # The release was never built (it failed, or its task was lost or killed): build it
            # again rather than compare with nothing.
            first.status, first.error, first.requested_by = BuildStatus.PENDING, "", actor
            first.created_at = first.enqueued_at = timezone.now()
            first.lease_owner = ""
            first.save(
                update_fields=[
                    "status",
                    "error",
                    "requested_by",
                    "created_at",
                    "enqueued_at",
                    "lease_owner",
                ]
            )
            engine.send(RELEASE_BUILD, first.pk)
            return first
        for stale in ReleaseBuild.objects.filter(release=release, is_rebuild=True).exclude(
            status__in=[BuildStatus.DONE, BuildStatus.FAILED]
        ):
            if build_is_stale(stale):
                stale.status, stale.error = BuildStatus.FAILED, "replaced: its worker stopped"
                stale.finished_at, stale.lease_owner = timezone.now(), ""
                stale.save(update_fields=["status", "error", "finished_at", "lease_owner"])
        if not ReleaseBuild.objects.filter(
            release=release, is_rebuild=False, status=BuildStatus.DONE
        ).exists():
            raise Conflict(f"release {release.version} has no finished build to compare with")
        if ReleaseBuild.objects.filter(
            release=release, is_rebuild=True, status__in=[BuildStatus.PENDING, BuildStatus.RUNNING]
        ).exists():
            raise Conflict(f"a rebuild of release {release.version} is already under way")
        build = ReleaseBuild.objects.create(release=release, is_rebuild=True, requested_by=actor)
        engine.send(RELEASE_BUILD, build.pk)
    return build


def release_tag_move(*, project: Project, actor: Any, name: str, release: Release) -> ReleaseTag:
    """Point the tag ``name`` of ``project`` at ``release`` (creating the tag if new).

    Every move is kept as a ``ReleaseTagMove``. Moving a tag to the release it already points
    at changes nothing.

    Raises:
        NotFound / PermissionDenied: ``actor`` is not a manager of the project.
        InvalidInput: a bad tag name, or a release of another project (``field``).
    """
    require_role(project=project, actor=actor, roles=MANAGERS)
    text = name.strip() if isinstance(name, str) else ""
    if not TAG_PATTERN.fullmatch(text):
        raise InvalidInput(
            "a tag is 1-64 characters of a-z, 0-9, '.', '_' and '-', starting with a letter "
            "or digit",
            field="name",
            prefix=False,
        )
    if release.project_id != project.pk:
        raise InvalidInput(
            f"release {release.pk} is not a release of {project.slug!r}",
            field="release",
            prefix=False,
        )
    now = timezone.now()
    with transaction.atomic():
        project_lock(project.pk)
        tag = ReleaseTag.objects.filter(project=project, name=text).first()
        previous = None
        if tag is None:
            tag = ReleaseTag.objects.create(
                project=project, name=text, release=release, moved_by=actor, moved_at=now
            )
        elif tag.release_id == release.pk:
            return tag
        else:
            previous = tag.release
            tag.release, tag.moved_by, tag.moved_at = release, actor, now
            tag.save(update_fields=["release", "moved_by", "moved_at"])
        ReleaseTagMove.objects.create(
            tag=tag, release=release, previous=previous, moved_by=actor, moved_at=now
        )
    return tag
