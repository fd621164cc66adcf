"""Projects, label policies and memberships."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, cast

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, User
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from labeling import permissions
from labeling.exceptions import InvalidInput, InvalidTransition, NotFound, PermissionDenied
from labeling.locks import project_label_writes_lock, project_lock
from labeling.models import (
    DEFAULT_ANSWER_LABELS,
    DEFAULT_CLAIM_LABELS,
    DEFAULT_UNAVAILABLE_REASONS,
    MAX_ID,
    EvidenceRelation,
    LabelPolicy,
    Membership,
    Project,
    Role,
)
from labeling.policy_presets import DEFAULT_PRESET, preset_get
from labeling.services.assignments import MAX_LEASE_MINUTES, MAX_OVERLAP, _check_int
from labeling.services.policies import PolicyDescription

logger = logging.getLogger(__name__)

# A project slug: what Django's SlugField accepts, lower case, starting with a letter or digit.
SLUG = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
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
            f"{slug!r} is not a slug: 1 to 64 lower-case letters, digits, '-' or '_', starting "
            "with a letter or digit",
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
        slug: URL name, unique: lower-case letters, digits, ``-`` and ``_``, at most 64.
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
    overlap = _check_int("overlap", overlap, 1, MAX_OVERLAP)
    lease_minutes = _check_int("lease_minutes", lease_minutes, 1, MAX_LEASE_MINUTES)
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
    project.save()
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
        raise InvalidInput(f"unknown evidence relation {evidence_relation!r}")
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


@transaction.atomic
def membership_set(*, project: Project, user: AbstractBaseUser, role: str) -> Membership:
    """Give ``user`` the ``role`` in ``project`` (one role per member; a second call changes it).

    Raises:
        InvalidInput: the role is unknown.
    """
    if role not in Role.values:
        raise InvalidInput(f"unknown role {role!r}; one of {Role.values}")
    membership, _ = Membership.objects.update_or_create(
        project=project, user=cast(User, user), defaults={"role": role}
    )
    return membership


# ---------------------------------------------------------------------------------------------
# Members: invite and change role, managers only
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MembershipInvite:
    """The result of :func:`membership_invite`.

    ``set_password_path`` is the site-relative one-time link (Django's ``password_reset_confirm``
    with a ``default_token_generator`` token) for an account created by the invite, else None.
    The token is not stored anywhere: show it once. It stops working once the password is set
    (the token hashes the password) or after ``settings.PASSWORD_RESET_TIMEOUT``.
    """

    membership: Membership
    created_user: bool
    set_password_path: str | None


def _set_password_path(user: Any) -> str:
    return reverse(
        "password_reset_confirm",
        kwargs={
            "uidb64": urlsafe_base64_encode(force_bytes(user.pk)),
            "token": default_token_generator.make_token(user),
        },
    )


@transaction.atomic
def membership_invite(
    *, project: Project, actor: Any, username: str, email: str = "", role: str
) -> MembershipInvite:
    """Add a user to ``project`` with ``role``; create the account if the username is new.

    An existing user (matched by username, case-sensitively as Django does) is added as is. A new
    username gets an account with ``email`` and an unusable password, and the result carries a
    one-time set-password link to hand to that person.

    Concurrency: opens its own transaction; the unique (project, user) constraint refuses a
    second membership, so two managers inviting the same person at once end with one.

    Raises:
        NotFound: ``actor`` is not a member of the project.
        PermissionDenied: ``actor`` is not a manager of the project.
        InvalidInput: unknown role (field ``role``), invalid username (``username``) or email
            (``email``), or the user is already a member (``username``).
    """
    permissions.require_role(
        project=project, actor=actor, roles=permissions.MANAGERS, outsider=PermissionDenied
    )
    if role not in Role.values:
        raise InvalidInput(f"unknown role {role!r}; one of {Role.values}", field="role")
    username = username.strip()
    email = email.strip()
    if email:
        try:
            validate_email(email)
        except ValidationError as exc:
            raise InvalidInput(f"{email!r} is not a valid email address", field="email") from exc
    user_model = get_user_model()
    user = user_model.objects.filter(**{user_model.USERNAME_FIELD: username}).first()
    created = False
    if user is None:
        user = user_model(**{user_model.USERNAME_FIELD: username}, email=email)
        user.set_unusable_password()
        try:
            user.full_clean(exclude=["password"])
        except ValidationError as exc:
            messages = "; ".join(
                f"{field}: {' '.join(errors)}" for field, errors in exc.message_dict.items()
            )
            # Every field's errors, each already named: the first field places the error.
            raise InvalidInput(messages, field=next(iter(exc.message_dict)), prefix=False) from exc
        user.save()
        created = True
    elif Membership.objects.filter(project=project, user=user).exists():
        raise InvalidInput(
            f"{username!r} is already a member of this project; change their role instead",
            field="username",
        )
    membership = Membership.objects.create(project=project, user=user, role=role)
    logger.info(
        "membership.invited",
        extra={
            "project_id": project.pk,
            "user_id": user.pk,
            "role": role,
            "created_user": created,
            "actor_id": getattr(actor, "pk", None),
        },
    )
    return MembershipInvite(
        membership=membership,
        created_user=created,
        set_password_path=_set_password_path(user) if created else None,
    )


@transaction.atomic
def membership_change(*, project: Project, actor: Any, user_id: int, role: str) -> Membership:
    """Change the role of the member ``user_id`` in ``project``.

    Concurrency: opens its own transaction and locks the project row, so two managers demoting
    each other at once cannot leave the project without a manager.

    Raises:
        NotFound: ``actor`` is not a member of the project.
        PermissionDenied: ``actor`` is not a manager of the project.
        InvalidInput: unknown role (field ``role``).
        NotFound: ``user_id`` is not a member of the project.
        InvalidTransition: the change would leave the project without a manager.
    """
    permissions.require_role(
        project=project, actor=actor, roles=permissions.MANAGERS, outsider=PermissionDenied
    )
    if role not in Role.values:
        raise InvalidInput(f"unknown role {role!r}; one of {Role.values}", field="role")
    project_lock(project.pk)
    membership = (
        Membership.objects.select_related("user").filter(project=project, user_id=user_id).first()
        if 0 < user_id <= MAX_ID
        else None
    )
    if membership is None:
        raise NotFound(f"user {user_id} is not a member of this project")
    if membership.role == role:
        return membership
    if (
        membership.role == Role.MANAGER
        and not Membership.objects.filter(project=project, role=Role.MANAGER)
        .exclude(pk=membership.pk)
        .exists()
    ):
        raise InvalidTransition("the project's last manager cannot be demoted; add another first")
    old = membership.role
    membership.role = role
    membership.save(update_fields=["role"])
    logger.info(
        "membership.role_changed",
        extra={
            "project_id": project.pk,
            "user_id": user_id,
            "old_role": old,
            "role": role,
            "actor_id": getattr(actor, "pk", None),
        },
    )
    return membership
