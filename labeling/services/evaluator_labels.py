"""Evaluator labels as their own import: judges run after the workload was imported.

One JSONL line per label (``EvaluatorLabelRecord`` in ``labeling/importers/schema.py``)::

    {"question": "q1", "candidate": "c0", "claim": 0, "evaluator": "judge",
     "version": "v2", "label": "contradicted", "score": 0.2}

Guarantees, as for the workload import (``labeling.services.imports``):

- **Strict.** pydantic strict mode, unknown fields refused; the label must be in the newest
  policy's vocabulary (claim labels for a claim, answer labels for a candidate); ``unavailable``
  has neither label nor score, an available label has one or both.
- **Atomic.** One transaction; any error refuses the whole file and nothing is written. Up to
  ``MAX_ERRORS`` errors are reported, each naming the line, the field and the reason.
- **Idempotent.** The same label again writes nothing; a different label for the same
  (evaluator version, target) is refused: a changed judge is a new evaluator version.
- **Targets exist.** Questions, candidates and claims are the imported ones; an unknown one is
  refused, naming the line.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any, cast

from django.contrib.auth.models import AbstractBaseUser, User
from django.db import transaction

from labeling import permissions
from labeling.derived import derived_mark_touched
from labeling.exceptions import InvalidInput, PermissionDenied, WorkloadImportFailed
from labeling.importers import SourcedRecord
from labeling.importers.native import file_sha256 as stream_sha256
from labeling.importers.native import read_jsonl
from labeling.importers.record_errors import RecordError, check_storable, echo
from labeling.importers.schema import EvaluatorLabelRecord, PolicyVocabulary
from labeling.importers.validation import MAX_ERRORS, validated_stream
from labeling.locks import project_label_writes_lock, project_lock
from labeling.models import (
    CandidateAnswer,
    Claim,
    DerivedKind,
    Evaluator,
    EvaluatorLabel,
    ImportBatch,
    Project,
    Question,
)
from labeling.services.imports import (
    BULK_BATCH,
    ImportResult,
    fingerprint,
    policy_vocabulary,
    same_label,
)

logger = logging.getLogger(__name__)

FORMAT = "evaluator_labels"
CHUNK_SIZE = 500
LabelKey = tuple[int, int, int | None]  # (evaluator id, candidate id, claim id or None)


def _check(record: EvaluatorLabelRecord, vocabulary: PolicyVocabulary, location: str) -> None:
    """Check the rules across fields of one record.

    Raises:
        RecordError: naming the offending field.
    """
    if record.unavailable:
        for name in ("label", "score"):
            if getattr(record, name) is not None:
                raise RecordError(
                    location,
                    name,
                    "an unavailable evaluator label has no label and no score "
                    "(unavailable is its own value, never a verdict)",
                )
        return
    if record.label is None and record.score is None:
        raise RecordError(location, "label", "give a label or a score, or set unavailable to true")
    allowed = vocabulary.claim_labels if record.claim is not None else vocabulary.answer_labels
    if record.label is not None and record.label not in allowed:
        raise RecordError(
            location, "label", f"{echo(record.label)} is not one of {sorted(allowed)}"
        )


def _validated(
    records: Iterable[SourcedRecord], vocabulary: PolicyVocabulary, errors: list[RecordError]
) -> Iterator[tuple[str, EvaluatorLabelRecord]]:
    """Yield the records that pass validation; append the others' errors to ``errors``."""

    def parse(location: str, raw: Any) -> EvaluatorLabelRecord:
        check_storable(raw, location)  # NUL and lone surrogates, also from non-file records
        record = EvaluatorLabelRecord.model_validate(raw)
        _check(record, vocabulary, location)
        return record

    return validated_stream(records, parse, errors)


class _Writer:
    """Resolves targets and collects new labels, chunk by chunk, inside the caller's transaction."""

    def __init__(self, project: Project, batch: ImportBatch, errors: list[RecordError]) -> None:
        self.project = project
        self.batch = batch
        self.errors = errors
        self.evaluators = {(e.name, e.version): e.pk for e in project.evaluators.all()}
        self.new_evaluators = 0
        self.created = 0
        # the evaluators this file gave new labels to
        self.labelled: set[int] = set()
        # (evaluator id, candidate id, claim id) -> (label, score, available), this file's labels
        self.seen: dict[LabelKey, tuple[Any, Any, Any]] = {}

    def _evaluator_id(self, name: str, version: str) -> int:
        key = (name, version)
        if key not in self.evaluators:
            evaluator = Evaluator.objects.create(project=self.project, name=name, version=version)
            self.new_evaluators += 1
            self.evaluators[key] = evaluator.pk
        return self.evaluators[key]

    def write(self, chunk: list[tuple[str, EvaluatorLabelRecord]]) -> None:
        """Resolve the chunk's targets; collect its errors, or write its new labels."""
        targets = _Targets.read(self.project, chunk)
        new: list[EvaluatorLabel] = []
        for location, record in chunk:
            if len(self.errors) >= MAX_ERRORS:
                break
            target = targets.resolve(location, record)
            if isinstance(target, RecordError):
                self.errors.append(target)
                continue
            label = self._new_label(location, record, target, targets.stored)
            if label is not None:
                new.append(label)
        if not self.errors:
            EvaluatorLabel.objects.bulk_create(new, batch_size=BULK_BATCH)
            self.created += len(new)
            self.labelled.update(label.evaluator_id for label in new)

    def _new_label(
        self,
        location: str,
        record: EvaluatorLabelRecord,
        target: tuple[int, int | None],
        stored: dict[LabelKey, tuple[Any, Any, Any]],
    ) -> EvaluatorLabel | None:
        """Return the unsaved new label of ``record``, or None (known, or an error appended)."""
        candidate_id, claim_id = target
        available = not record.unavailable
        value = (record.label, record.score, available)
        evaluator_id = self.evaluators.get((record.evaluator, record.version))
        key = (evaluator_id, candidate_id, claim_id) if evaluator_id is not None else None
        known = None if key is None else self.seen.get(key, stored.get(key))
        if known is not None:
            if not same_label(known, value):
                self.errors.append(
                    RecordError(
                        location,
                        "label",
                        f"evaluator {record.evaluator}@{record.version} already labelled "
                        "this target differently; a changed judge is a new evaluator version",
                    )
                )
            return None
        if self.errors:
            return None  # refused anyway: write nothing more, keep looking for errors
        evaluator_id = self._evaluator_id(record.evaluator, record.version)
        self.seen[(evaluator_id, candidate_id, claim_id)] = value
        return EvaluatorLabel(
            evaluator_id=evaluator_id,
            candidate_id=candidate_id,
            claim_id=claim_id,
            label=record.label,
            score=record.score,
            available=available,
            raw=record.raw,
            import_batch=self.batch,
        )


@dataclass(frozen=True)
class _Targets:
    """The questions, candidates and claims one chunk names, and their stored labels."""

    questions: dict[str, int]
    candidates: dict[tuple[int, str], int]
    claims: dict[tuple[int, int], int]
    stored: dict[LabelKey, tuple[Any, Any, Any]]

    @classmethod
    def read(cls, project: Project, chunk: list[tuple[str, EvaluatorLabelRecord]]) -> _Targets:
        """Read the targets the chunk's records name (four queries)."""
        questions = dict(
            Question.objects.filter(
                project=project, external_id__in={r.question for _, r in chunk}
            ).values_list("external_id", "pk")
        )
        candidates = {
            (q, key): pk
            for pk, q, key in CandidateAnswer.objects.filter(
                question_id__in=questions.values(), key__in={r.candidate for _, r in chunk}
            ).values_list("pk", "question_id", "key")
        }
        claims = {
            (c, index): pk
            for pk, c, index in Claim.objects.filter(
                candidate_id__in=candidates.values()
            ).values_list("pk", "candidate_id", "index")
        }
        stored: dict[LabelKey, tuple[Any, Any, Any]] = {
            (e, c, k): (label, score, available)
            for e, c, k, label, score, available in EvaluatorLabel.objects.filter(
                candidate_id__in=candidates.values()
            ).values_list("evaluator_id", "candidate_id", "claim_id", "label", "score", "available")
        }
        return cls(questions, candidates, claims, stored)

    def resolve(
        self, location: str, record: EvaluatorLabelRecord
    ) -> tuple[int, int | None] | RecordError:
        """Return (candidate id, claim id or None) of the record's target, or the error."""
        question_id = self.questions.get(record.question)
        if question_id is None:
            return RecordError(
                location, "question", f"no question {echo(record.question)} in the project"
            )
        candidate_id = self.candidates.get((question_id, record.candidate))
        if candidate_id is None:
            return RecordError(
                location,
                "candidate",
                f"question {echo(record.question)} has no candidate {echo(record.candidate)}",
            )
        if record.claim is None:
            return candidate_id, None
        claim_id = self.claims.get((candidate_id, record.claim))
        if claim_id is None:
            n = sum(1 for c, _ in self.claims if c == candidate_id)
            return RecordError(
                location,
                "claim",
                f"claim index {record.claim} but candidate {echo(record.candidate)} has {n} claims",
            )
        return candidate_id, claim_id


@transaction.atomic
def evaluator_labels_import(
    *,
    project: Project,
    records: Iterable[SourcedRecord],
    actor: AbstractBaseUser | None,
    filename: str,
    file_sha256: str | None = None,
) -> ImportResult:
    """Import evaluator labels of already imported candidates and claims (managers only).

    Args:
        project: the target project; its newest label policy gives the label vocabulary.
        records: ``(location, object-or-RecordError)`` pairs, e.g. from ``read_jsonl``.
        actor: the importing user (must be a manager of the project), or None from the
            command line.
        filename: the file's name, for the batch record.
        file_sha256: sha256 of the file; a file already imported into the project is not read
            again. When None, the fingerprint of the records is used.

    Returns:
        An :class:`ImportResult`; ``batch`` is None when nothing new was written.

    Raises:
        PermissionDenied: ``actor`` is not a manager of the project.
        WorkloadImportFailed: invalid, unknown-target or conflicting records; nothing written.
        InvalidInput: the project has no label policy.
    """
    permissions.require_role(
        project=project,
        actor=actor,
        roles=permissions.MANAGERS,
        action="import",
        outsider=PermissionDenied,
    )
    project_label_writes_lock(project.pk)  # before the project row (labeling/locks.py)
    project = project_lock(project.pk)
    if file_sha256 is None:
        records = list(records)
        file_sha256 = fingerprint(
            [[loc, str(r) if isinstance(r, RecordError) else r] for loc, r in records]
        )
    previous = ImportBatch.objects.filter(project=project, file_sha256=file_sha256).first()
    if previous is not None:
        return ImportResult(batch=previous, records=0, created={}, already_imported=True)
    policy = project.policies.order_by("-version").first()
    if policy is None:
        raise InvalidInput(f"project {project.slug!r} has no label policy; create one first")
    vocabulary = policy_vocabulary(policy)
    batch = ImportBatch.objects.create(
        project=project,
        format=FORMAT,
        filename=filename.encode("utf-8", "replace").decode("utf-8")[:500],
        file_sha256=file_sha256,
        created_by=cast(User, actor) if actor is not None and actor.is_authenticated else None,
    )
    errors: list[RecordError] = []
    writer = _Writer(project, batch, errors)
    chunk: list[tuple[str, EvaluatorLabelRecord]] = []
    n_records = 0
    for location, record in _validated(records, vocabulary, errors):
        n_records += 1
        chunk.append((location, record))
        if len(chunk) >= CHUNK_SIZE:
            writer.write(chunk)
            chunk.clear()
    if chunk and len(errors) < MAX_ERRORS:
        writer.write(chunk)
    if errors:
        # The transaction is rolled back: the batch and any label of this file are not kept.
        raise WorkloadImportFailed(errors[:MAX_ERRORS])
    created = {
        k: v
        for k, v in (("evaluator_labels", writer.created), ("evaluators", writer.new_evaluators))
        if v
    }
    if not created:
        batch.delete()
        return ImportResult(batch=None, records=n_records, created={})
    batch.report = {"records": n_records, "created": created, "notes": {}}
    batch.save(update_fields=["report"])
    # Evaluator labels feed the calibration runs whose score field names their evaluator and
    # the audits of their evaluator: only those are marked stale.
    derived_mark_touched(
        project_id=project.pk,
        kinds=[DerivedKind.CALIBRATION, DerivedKind.AUDIT],
        evaluator_ids=sorted(writer.labelled),
    )
    logger.info(
        "evaluator_labels_import.done",
        extra={"project": project.slug, "batch": batch.pk, "records": n_records},
    )
    return ImportResult(batch=batch, records=n_records, created=created)


def evaluator_labels_import_file(
    *,
    project: Project,
    stream: IO[bytes],
    filename: str,
    actor: AbstractBaseUser | None = None,
) -> ImportResult:
    """Read a seekable binary JSONL file and import it with :func:`evaluator_labels_import`.

    The one entry point of the command and the API.
    """
    digest = stream_sha256(stream)
    return evaluator_labels_import(
        project=project,
        records=read_jsonl(stream),
        actor=actor,
        filename=filename,
        file_sha256=digest,
    )
