"""What a format gives beside records: label policies to restore and the partition to freeze."""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.utils import timezone
from pydantic import ValidationError

from labeling.exceptions import WorkloadImportFailed
from labeling.importers import SourcedRecord
from labeling.importers.record_errors import RecordError, format_validation_error
from labeling.importers.schema import PartitionIn, PolicyIn
from labeling.importers.validation import validated_stream
from labeling.models import LabelPolicy, Partition, Project
from labeling.models.catalog import default_evidence_labels
from labeling.services.imports.common import differing_field

POLICY_CONTENT = (
    "guideline",
    "evidence_relation",
    "answer_labels",
    "claim_labels",
    "unavailable_reasons",
)
PARTITION_ORDER: tuple[str, ...] = tuple(Partition.values)
_ONLY_EMPTY = "policies are restored only into a project without questions"


def _detail_defaults() -> dict[str, Any]:
    """Return the detail fields a restored version takes: a release holds none (defaults)."""
    return {"label_details": {}, "evidence_labels": default_evidence_labels(), "reason_texts": {}}


def _policy_specs(given: list[SourcedRecord]) -> dict[int, tuple[str, PolicyIn]]:
    """Validate every given policy; return ``{version: (location, policy)}``.

    Raises:
        WorkloadImportFailed: invalid or repeated policies, or none.
    """
    errors: list[RecordError] = []
    specs: dict[int, tuple[str, PolicyIn]] = {}

    def parse(_location: str, raw: Any) -> PolicyIn:
        return PolicyIn.model_validate(raw)

    # Every policy is checked: the limit is never reached (at most one error per policy).
    for location, spec in validated_stream(given, parse, errors, limit=len(given) + 1):
        if spec.version in specs:
            errors.append(RecordError(location, "version", f"version {spec.version} repeats"))
        specs[spec.version] = (location, spec)
    if not specs and not errors:
        errors.append(RecordError("(input)", "policies", "no label policy is given"))
    if errors:
        raise WorkloadImportFailed(errors)
    return specs


def _refused(location: str, field: str, reason: str) -> WorkloadImportFailed:
    return WorkloadImportFailed([RecordError(location, field, reason)])


def restore_policies(
    project: Project, given: list[SourcedRecord], fresh: bool, created: Counter[str]
) -> None:
    """Make the project's label policy versions exactly those ``given`` (a release's).

    Into a project without questions, missing versions are created and an unfrozen version with
    other content (e.g. the default policy ``--create`` made) takes the given content. Into any
    other project, the given versions must already be there, identical, and no other.

    Raises:
        WorkloadImportFailed: an invalid policy, or policies that differ from the project's.
    """
    specs = _policy_specs(given)
    existing = {p.version: p for p in project.policies.order_by("version")}
    extra = sorted(set(existing) - set(specs))
    if extra:
        raise _refused(
            specs[min(specs)][0],
            "version",
            f"project {project.slug!r} has label policy version(s) {extra}, which the input "
            f"does not list (it lists {sorted(specs)})",
        )
    for version in sorted(specs):
        location, spec = specs[version]
        _restore_policy(project, existing, version, location, spec, fresh, created)


def _restore_policy(
    project: Project,
    existing: dict[int, LabelPolicy],
    version: int,
    location: str,
    spec: PolicyIn,
    fresh: bool,
    created: Counter[str],
) -> None:
    """Make version ``version`` of the project's policy hold ``spec``'s content.

    Raises:
        WorkloadImportFailed: the stored version differs and may not change, or the version is
            missing and may not be created.
    """
    content = spec.model_dump(include=set(POLICY_CONTENT))
    policy = existing.get(version)
    if policy is not None:
        stored = {name: getattr(policy, name) for name in POLICY_CONTENT}
        if stored == content:
            return
        if fresh and policy.frozen_at is None:
            # The release's own content, with the default details and evidence rule (what a
            # release's policy means); a preset's details of the replaced draft do not stay.
            content.update(_detail_defaults())
            for name, value in content.items():
                setattr(policy, name, value)
            policy.save(update_fields=list(content))
            created["label_policies"] += 1
            return
        name = differing_field(stored, content)
        raise _refused(
            location,
            name,
            f"label policy version {version} of project {project.slug!r} has another "
            f"{name}; {_ONLY_EMPTY}",
        )
    newer = [v for v in existing if v > version]
    if not fresh or newer:
        why = f"it has version {max(newer)} already" if newer else _ONLY_EMPTY
        raise _refused(
            location,
            "version",
            f"project {project.slug!r} has no label policy version {version}; {why}",
        )
    previous = existing[max(existing)] if existing else None
    existing[version] = LabelPolicy.objects.create(
        project=project, version=version, previous=previous, **content
    )
    created["label_policies"] += 1


def partition_spec(partition: SourcedRecord | None) -> tuple[str, PartitionIn | None]:
    """Validate a format's partition spec: seed and proportions summing to 1.

    Raises:
        WorkloadImportFailed: naming the field.
    """
    if partition is None:
        return "(input)", None
    location, raw = partition
    if isinstance(raw, RecordError):
        raise WorkloadImportFailed([raw])
    try:
        spec = PartitionIn.model_validate(raw)
    except ValidationError as exc:
        raise WorkloadImportFailed([format_validation_error(exc, location)]) from None
    total = sum(spec.proportions.values())
    if abs(total - 1) > 1e-9:
        raise _refused(location, "proportions", f"proportions sum to {total}, not 1")
    return location, spec


def freeze_partition(project: Project, spec: PartitionIn) -> None:
    """Record the split the import created: the given seed and proportions, frozen now."""
    proportions = {str(name): float(share) for name, share in spec.proportions.items()}
    project.partition_seed = spec.seed
    project.partition_proportions = {p: float(proportions.get(p, 0.0)) for p in PARTITION_ORDER}
    project.partition_frozen_at = timezone.now()
    project.save(update_fields=["partition_seed", "partition_proportions", "partition_frozen_at"])
