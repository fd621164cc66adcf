"""Projects and label policies (members: labeling/services/members.py)."""

from __future__ import annotations

import logging
import re
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from labeling import permissions
from labeling.exceptions import InvalidInput, PermissionDenied
from labeling.importers.record_errors import echo
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
from labeling.policy_presets import DEFAULT_PRESET, preset_get
from labeling.services.labelling_queue import MAX_LEASE_MINUTES, MAX_OVERLAP, check_int
from labeling.services.members import membership_set
from labeling.services.policies import PolicyDescription

logger = logging.getLogger(__name__)

# A project slug: what Django's SlugField and the ``<slug:>`` URL converter accept, 64 at most.
SLUG = re.compile(r"[-a-zA-Z0-9_]{1,64}")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


MAX_NAME_LENGTH = 200
MAX_PROJECT_DESCRIPTION_LENGTH = 10_000


def _project_fields(slug: Any, name: Any, description: Any) -> tuple[str, str, str]:
    """Check a new project's slug, name and description; return them stripped.

    Raises:
        InvalidInput: naming the field (``slug``, ``name`` or ``description``).
    """
    if not isinstance(slug, str) or not SLUG.fullmatch(slug):
        raise InvalidInput(
            f"{slug!r} is not a slug: 1 to 64 ASCII letters, digits, '-' or '_'",
            field="slug",
        )
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput("a project needs a name", field="name")
    if len(name.strip()) > MAX_NAME_LENGTH or CONTROL.search(name):
        raise InvalidInput(
            f"at most {MAX_NAME_LENGTH} characters, no control characters", field="name"
        )
    if not isinstance(description, str):
        raise InvalidInput("expected text", field="description")
    if len(description) > MAX_PROJECT_DESCRIPTION_LENGTH or "\x00" in description:
        raise InvalidInput(
            f"at most {MAX_PROJECT_DESCRIPTION_LENGTH} characters, no NUL", field="description"
        )
    if Project.objects.filter(slug=slug).exists():
        raise InvalidInput(f"a project with slug {slug!r} already exists", field="slug")
    return slug, name.strip(), description.strip()


@transaction.atomic
def project_create(
    *,
    slug: str,
    name: str,
    description: str = "",
    preset: str = DEFAULT_PRESET,
    overlap: int = 2,
    lease_minutes: int = 30,
    manager: AbstractBaseUser | None = None,
    actor: Any = None,
) -> Project:
    """Create a project with label policy v1 from ``preset`` and, if given, its manager.

    Args:
        slug: URL name, unique: 1 to 64 ASCII letters, digits, ``-`` and ``_``.
        name: Display name, 1 to 200 characters.
        description: Free text (at most 10 000 characters).
        preset: A preset of :mod:`labeling.policy_presets` (default source-relative).
        overlap: Independent annotations per item, 1 to 100.
        lease_minutes: How long an annotator holds an item, 1 minute to 7 days.
        manager: A user made the project's manager (the command line's ``--create`` passes
            none).
        actor: The person creating the project from the web or the API: they must be allowed
            to (:func:`labeling.permissions.can_create_projects`) and become its manager.

    Raises:
        PermissionDenied: ``actor`` may not create projects.
        InvalidInput: naming the field: the slug is taken or invalid, no name, an unknown
            preset, overlap or lease out of range.
    """
    if actor is not None and not permissions.can_create_projects(actor):
        raise PermissionDenied(
            "you may not create projects (staff, the labeling.add_project permission, or "
            "CERTLABEL_ANYONE_CREATES_PROJECTS allow it)"
        )
    slug, name, description = _project_fields(slug, name, description)
    chosen = preset_get(preset)
    overlap = check_int("overlap", overlap, 1, MAX_OVERLAP)
    lease_minutes = check_int("lease_minutes", lease_minutes, 1, MAX_LEASE_MINUTES)
    project = Project(
        slug=slug,
        name=name,
        description=description,
        overlap=overlap,
        lease_minutes=lease_minutes,
    )
    try:
        project.full_clean()
    except ValidationError as exc:
        field = next(iter(exc.message_dict))
        raise InvalidInput(" ".join(exc.message_dict[field]), field=field) from exc
    try:
        with transaction.atomic():
            project.save()
    except IntegrityError as exc:  # another request created the slug since the check above
        raise InvalidInput(f"a project with slug {slug!r} already exists", field="slug") from exc
    policy_create_from(project=project, description=chosen.description)
    if manager is not None:
        membership_set(project=project, user=manager, role=Role.MANAGER)
    if actor is not None:
        membership_set(project=project, user=actor, role=Role.MANAGER)
        logger.info(
            "project.created",
            extra={"project_id": project.pk, "preset": chosen.name, "actor_id": actor.pk},
        )
    return project


def _policy_next(project: Project, fields: dict[str, Any]) -> LabelPolicy:
    """Save the project's next policy version with ``fields``, linked to the previous one."""
    project_label_writes_lock(project.pk)  # a release pins the project's policies
    previous = project.policies.order_by("-version").first()
    policy = LabelPolicy(
        project=project,
        version=1 if previous is None else previous.version + 1,
        previous=previous,
        **fields,
    )
    policy.save()
    return policy


@transaction.atomic
def policy_create_from(*, project: Project, description: PolicyDescription) -> LabelPolicy:
    """Create the project's next label policy version from a validated description.

    ``description`` comes from :func:`labeling.services.policies.policy_description_check`
    (or a preset); every field it holds is written, details and evidence rule included.
    """
    return _policy_next(project, description.model_fields())


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

    Labels and reasons not given are the default schema's; display details are the defaults
    and ``supported`` and ``contradicted`` require evidence.

    Raises:
        InvalidInput: the evidence relation is unknown or a label list is empty.
    """
    if evidence_relation not in EvidenceRelation.values:
        raise InvalidInput(f"unknown evidence relation {echo(evidence_relation)}")
    return _policy_next(
        project,
        {
            "guideline": guideline,
            "evidence_relation": evidence_relation,
            "answer_labels": answer_labels or list(DEFAULT_ANSWER_LABELS),
            "claim_labels": claim_labels or list(DEFAULT_CLAIM_LABELS),
            "unavailable_reasons": unavailable_reasons or list(DEFAULT_UNAVAILABLE_REASONS),
        },
    )
