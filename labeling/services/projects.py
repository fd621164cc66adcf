"""Projects and label policies (members: labeling/services/members.py)."""

from __future__ import annotations

import logging

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction

from labeling.exceptions import InvalidInput
from labeling.locks import project_label_writes_lock
from labeling.models import (
    DEFAULT_ANSWER_LABELS,
    DEFAULT_CLAIM_LABELS,
    DEFAULT_UNAVAILABLE_REASONS,
    EvidenceRelation,
    LabelPolicy,
    Project,
    Role,
)
from labeling.services.members import membership_set

logger = logging.getLogger(__name__)


@transaction.atomic
def project_create(
    *,
    slug: str,
    name: str,
    description: str = "",
    guideline: str = "",
    evidence_relation: str = EvidenceRelation.SOURCE_RELATIVE,
    manager: AbstractBaseUser | None = None,
) -> Project:
    """Create a project with label policy v1 (the default schema) and, if given, its manager.

    Raises:
        InvalidInput: the slug is taken or invalid.
    """
    if Project.objects.filter(slug=slug).exists():
        raise InvalidInput(f"a project with slug {slug!r} already exists")
    project = Project(slug=slug, name=name, description=description)
    try:
        project.full_clean()
    except ValidationError as exc:
        raise InvalidInput(f"invalid project: {exc.message_dict}") from exc
    project.save()
    policy_create(project=project, guideline=guideline, evidence_relation=evidence_relation)
    if manager is not None:
        membership_set(project=project, user=manager, role=Role.MANAGER)
    return project


@transaction.atomic
def policy_create(
    *,
    project: Project,
    guideline: str,
    evidence_relation: str = EvidenceRelation.SOURCE_RELATIVE,
    answer_labels: list[str] | None = None,
    claim_labels: list[str] | None = None,
    unavailable_reasons: list[str] | None = None,
) -> LabelPolicy:
    """Create the project's next label policy version, linked to the previous one.

    Raises:
        InvalidInput: the evidence relation is unknown or a label list is empty.
    """
    if evidence_relation not in EvidenceRelation.values:
        raise InvalidInput(f"unknown evidence relation {evidence_relation!r}")
    project_label_writes_lock(project.pk)  # a release pins the project's policies
    previous = project.policies.order_by("-version").first()
    policy = LabelPolicy(
        project=project,
        version=1 if previous is None else previous.version + 1,
        previous=previous,
        guideline=guideline,
        evidence_relation=evidence_relation,
        answer_labels=answer_labels or list(DEFAULT_ANSWER_LABELS),
        claim_labels=claim_labels or list(DEFAULT_CLAIM_LABELS),
        unavailable_reasons=unavailable_reasons or list(DEFAULT_UNAVAILABLE_REASONS),
    )
    policy.save()
    return policy
