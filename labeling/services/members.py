"""Members and invitations: nobody joins a project without accepting; a manager always remains.

A manager invites a person by username or e-mail address (:func:`invitation_create`). An
existing account gets an invitation it accepts or declines on its project list
(:func:`invitation_accept`, :func:`invitation_decline`); an unknown e-mail address gets a
one-time join link that creates the account and the membership together
(:func:`invitation_join`). The answer is the same whether an account exists or not. Members
change role, are deactivated (they keep their row and labels but have no role and no lease),
reactivated or removed (their labels stay, attributed). Every change keeps at least one active
manager in the project (:func:`membership_set`, used by the Django admin and the command line,
holds the same rule).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from django.conf import settings
from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.models import AbstractBaseUser, User
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from labeling import permissions
from labeling.exceptions import InvalidInput, InvalidTransition, NotFound, PermissionDenied
from labeling.importers.record_errors import echo
from labeling.locks import invitation_lock, project_lock
from labeling.mail import mail_send
from labeling.models import MAX_ID, Invitation, InvitationStatus, Membership, Project, Role
from labeling.services.leases import assignments_release_member

logger = logging.getLogger(__name__)

MAX_INVITEE = 254


def token_hash(token: str) -> str:
    """Return the SHA-256 (64 hex digits) under which a join token is stored."""
    return hashlib.sha256(token.encode()).hexdigest()


def _check_role(role: str) -> None:
    if role not in Role.values:
        raise InvalidInput(f"unknown role {echo(role)}; one of {Role.values}", field="role")


def membership_refusal(membership: Membership, *, role: str, is_active: bool) -> str | None:
    """Return why ``membership`` may not become (``role``, ``is_active``), or None if it may.

    The last-manager rule as a read, for forms that report it beside the field (the Django
    admin); the services check it again under the project's lock.
    """
    if not (membership.is_active and membership.role == Role.MANAGER):
        return None
    if role == Role.MANAGER and is_active:
        return None
    others = Membership.objects.filter(
        project_id=membership.project_id, role=Role.MANAGER, is_active=True
    ).exclude(pk=membership.pk)
    if others.exists():
        return None
    return (
        "the project's last active manager cannot be demoted, deactivated or removed; "
        "make another member a manager first"
    )


def _keep_a_manager(membership: Membership, *, role: str = "", is_active: bool = False) -> None:
    """Refuse to take the project's last active manager out of that role.

    The caller holds the project's lock. The defaults describe a removal.

    Raises:
        InvalidTransition: ``membership`` is the project's last active manager.
    """
    refusal = membership_refusal(membership, role=role, is_active=is_active)
    if refusal is not None:
        raise InvalidTransition(refusal)


def projects_kept_by(user_id: int) -> list[str]:
    """Return the slugs of the projects whose only active manager is ``user_id``.

    Deleting such an account would leave those projects without a manager (the Django admin's
    user pages refuse it).
    """
    managed = Membership.objects.filter(user_id=user_id, role=Role.MANAGER, is_active=True)
    slugs = []
    for membership in managed.select_related("project"):
        if membership_refusal(membership, role="", is_active=False) is not None:
            slugs.append(membership.project.slug)
    return sorted(slugs)


def membership_set(*, project: Project, user: AbstractBaseUser, role: str) -> Membership:
    """Give ``user`` the ``role`` in ``project`` (active); a second call changes it.

    For trusted callers (the command line, the Django admin, a project's creation or restore):
    no actor and no invitation, but the last-manager rule holds.

    Raises:
        InvalidInput: the role is unknown.
        InvalidTransition: the change would demote the project's last active manager.
    """
    _check_role(role)
    with transaction.atomic():
        project_lock(project.pk)
        membership = Membership.objects.filter(project=project, user=cast(User, user)).first()
        if membership is None:
            return Membership.objects.create(project=project, user=cast(User, user), role=role)
        _keep_a_manager(membership, role=role, is_active=True)
        membership.role, membership.is_active, membership.from_groups = role, True, False
        membership.save(update_fields=["role", "is_active", "from_groups"])
        return membership


def _member_for_update(project: Project, user_id: int) -> Membership:
    """Return the membership of ``user_id`` after locking the project.

    Raises:
        NotFound: ``user_id`` is not a member of the project.
    """
    project_lock(project.pk)
    membership = (
        Membership.objects.select_related("user").filter(project=project, user_id=user_id).first()
        if 0 < user_id <= MAX_ID
        else None
    )
    if membership is None:
        raise NotFound(f"user {user_id} is not a member of this project")
    return membership


def _require_manager(project: Project, actor: Any, action: str) -> None:
    permissions.require_role(
        project=project,
        actor=actor,
        roles=permissions.MANAGERS,
        action=action,
        outsider=PermissionDenied,
    )


def _log(event: str, project: Project, actor: Any, **fields: Any) -> None:
    logger.info(
        event, extra={"project_id": project.pk, "actor_id": getattr(actor, "pk", None), **fields}
    )


@transaction.atomic
def membership_change(*, project: Project, actor: Any, user_id: int, role: str) -> Membership:
    """Change the role of the member ``user_id`` in ``project``.

    Concurrency: opens its own transaction and locks the project row, so two managers demoting
    each other at once cannot leave the project without a manager.

    Raises:
        PermissionDenied: ``actor`` is not a manager of the project (nor staff).
        InvalidInput: unknown role (field ``role``).
        NotFound: ``user_id`` is not a member of the project.
        InvalidTransition: the change would demote the last active manager.
    """
    _require_manager(project, actor, "change roles")
    _check_role(role)
    membership = _member_for_update(project, user_id)
    if membership.role == role:
        return membership
    _keep_a_manager(membership, role=role, is_active=membership.is_active)
    old = membership.role
    membership.role, membership.from_groups = role, False
    membership.save(update_fields=["role", "from_groups"])
    _log("membership.role_changed", project, actor, user_id=user_id, old_role=old, role=role)
    return membership


@transaction.atomic
def membership_deactivate(*, project: Project, actor: Any, user_id: int) -> Membership:
    """Deactivate the member ``user_id``: no role in the project, every lease given back.

    The row stays (reactivate with :func:`membership_reactivate`); their submitted labels stay.
    Deactivating an inactive member returns it unchanged.

    Raises:
        PermissionDenied: ``actor`` is not a manager of the project (nor staff).
        NotFound: ``user_id`` is not a member of the project.
        InvalidTransition: ``user_id`` is the last active manager.
    """
    _require_manager(project, actor, "deactivate members")
    membership = _member_for_update(project, user_id)
    if not membership.is_active:
        return membership
    _keep_a_manager(membership, role=membership.role, is_active=False)
    membership.is_active, membership.from_groups = False, False
    membership.save(update_fields=["is_active", "from_groups"])
    released = assignments_release_member(project=project, user_id=user_id)
    _log("membership.deactivated", project, actor, user_id=user_id, leases_released=released)
    return membership


@transaction.atomic
def membership_reactivate(*, project: Project, actor: Any, user_id: int) -> Membership:
    """Reactivate the member ``user_id`` with the role they had.

    Raises:
        PermissionDenied: ``actor`` is not a manager of the project (nor staff).
        NotFound: ``user_id`` is not a member of the project.
    """
    _require_manager(project, actor, "reactivate members")
    membership = _member_for_update(project, user_id)
    if not membership.is_active:
        membership.is_active, membership.from_groups = True, False
        membership.save(update_fields=["is_active", "from_groups"])
        _log("membership.reactivated", project, actor, user_id=user_id)
    return membership


@transaction.atomic
def membership_remove(*, project: Project, actor: Any, user_id: int) -> None:
    """Remove the member ``user_id`` from ``project``; every lease they hold is given back.

    Their submitted labels, skips and resolutions stay, attributed to their account.

    Raises:
        PermissionDenied: ``actor`` is not a manager of the project (nor staff).
        NotFound: ``user_id`` is not a member of the project.
        InvalidTransition: ``user_id`` is the last active manager.
    """
    _require_manager(project, actor, "remove members")
    membership = _member_for_update(project, user_id)
    _keep_a_manager(membership)
    membership.delete()
    released = assignments_release_member(project=project, user_id=user_id)
    _log("membership.removed", project, actor, user_id=user_id, leases_released=released)


# ---------------------------------------------------------------------------------------------
# Invitations
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InvitationSent:
    """The result of :func:`invitation_create`.

    ``email_failed`` is True when an e-mail was due and could not be sent (logged); the
    invitation stands either way. Nothing here tells whether the invitee has an account.
    """

    invitation: Invitation
    email_failed: bool


def _find_account(invitee: str) -> Any:
    """Return the account ``invitee`` names (a username, or an e-mail held by one account)."""
    users = get_user_model().objects.filter(is_active=True)
    if "@" in invitee:
        matches = list(users.filter(email__iexact=invitee)[:2])
        return matches[0] if len(matches) == 1 else None
    return users.filter(**{get_user_model().USERNAME_FIELD: invitee}).first()


def _check_invitee(invitee: str) -> None:
    if not invitee:
        raise InvalidInput("give a username or an e-mail address", field="invitee")
    if len(invitee) > MAX_INVITEE:
        raise InvalidInput(f"at most {MAX_INVITEE} characters", field="invitee")
    if "@" in invitee:
        try:
            validate_email(invitee)
        except ValidationError as exc:
            raise InvalidInput(
                f"{echo(invitee)} is not a valid e-mail address", field="invitee"
            ) from exc
        return
    validator = get_user_model().username_validator
    try:
        validator(invitee)
    except ValidationError as exc:
        raise InvalidInput(" ".join(exc.messages), field="invitee") from exc


def _project_url(site: str, project: Project) -> str:
    return site.rstrip("/") + reverse("project-list")


def _invitation_email(
    invitation: Invitation, *, site: str, token: str | None, inviter: Any
) -> tuple[str, str]:
    project = invitation.project
    who = inviter.get_username() if inviter is not None else "A project manager"
    subject = f"Invitation to the project {project.name} on certlabel"
    intro = (
        f"{who} invites you to the project {project.name!r} as {invitation.role}.\n"
        f"The invitation expires at {invitation.expires_at:%Y-%m-%d %H:%M} UTC.\n\n"
    )
    if token is None:
        action = (
            "Log in and accept or decline it on your project list:\n"
            f"{_project_url(site, project)}\n"
        )
    else:
        link = site.rstrip("/") + reverse("invitation-join", kwargs={"token": token})
        action = (
            "Open this one-time link to choose a username and password and join:\n"
            f"{link}\n\nIf you did not expect this, ignore this e-mail.\n"
        )
    return subject, intro + action


def invitation_create(
    *, project: Project, actor: Any, invitee: str, role: str, site: str
) -> InvitationSent:
    """Invite ``invitee`` (a username or an e-mail address) to ``project`` with ``role``.

    An existing account (the username, or the one account with that e-mail) gets a pending
    invitation it accepts on its project list, and an e-mail saying so if it has an address. An
    unknown e-mail address gets a one-time join link by e-mail (its token is stored hashed). An
    unknown username gets a pending invitation nobody can accept, which expires: the answer is
    the same in every case, so it does not tell whether an account exists. A pending invitation
    of the same invitee is replaced (revoked). Nobody becomes a member here.

    ``invitee`` is a username or an e-mail address (with ``@``), at most 254 characters; ``site`` is
    the ``scheme://host`` of the e-mail's links.

    Returns:
        The invitation and whether a due e-mail failed to send.

    Concurrency: the writes are one transaction; the e-mail is sent after it.

    Raises:
        PermissionDenied: ``actor`` is not a manager of the project (nor staff).
        InvalidInput: unknown role (field ``role``), invalid invitee (``invitee``), or the
            invitee is already a member (``invitee``).
    """
    _require_manager(project, actor, "invite people")
    _check_role(role)
    invitee = invitee.strip()
    _check_invitee(invitee)
    with transaction.atomic():
        project_lock(project.pk)
        user = _find_account(invitee)
        if user is not None and Membership.objects.filter(project=project, user=user).exists():
            raise InvalidInput(
                f"{echo(invitee)} is already a member of this project; change their role instead",
                field="invitee",
            )
        now = timezone.now()
        pending = Invitation.objects.filter(project=project, status=InvitationStatus.PENDING)
        same = pending.filter(invitee__iexact=invitee)
        if user is not None:
            same = same | pending.filter(user=user)
        same.update(status=InvitationStatus.REVOKED, ended_at=now)
        token = None if user is not None or "@" not in invitee else secrets.token_urlsafe(32)
        invitation = Invitation.objects.create(
            project=project,
            invitee=invitee,
            user=user,
            email=(user.email if user is not None else invitee if token else ""),
            role=role,
            token_hash=token_hash(token) if token else "",
            invited_by=actor if getattr(actor, "is_authenticated", False) else None,
            expires_at=now + timedelta(days=settings.INVITATION_DAYS),
        )
    _log("invitation.created", project, actor, invitation_id=invitation.pk, role=role)
    failed = False
    if invitation.email:
        subject, body = _invitation_email(invitation, site=site, token=token, inviter=actor)
        sent = mail_send(subject=subject, body=body, to=invitation.email, purpose="invitation")
        failed = not sent
    return InvitationSent(invitation=invitation, email_failed=failed)


def _pending_for_update(queryset: Any, invitation_id: int, what: str) -> Invitation:
    """Lock and return a pending, unexpired invitation of ``queryset``.

    Raises:
        NotFound: no such invitation in ``queryset``.
        InvalidTransition: it is no longer pending, or it expired.
    """
    invitation = invitation_lock(queryset, invitation_id) if 0 < invitation_id <= MAX_ID else None
    if invitation is None:
        raise NotFound(f"invitation {invitation_id} not found")
    if invitation.status != InvitationStatus.PENDING:
        raise InvalidTransition(f"this invitation was {invitation.status}; it cannot be {what}")
    if invitation.expires_at <= timezone.now():
        raise InvalidTransition(f"this invitation expired; it cannot be {what}")
    return invitation


def _join(invitation: Invitation, user: Any) -> Membership:
    """Make ``user`` a member as the invitation says and mark it accepted (caller locked it)."""
    project = project_lock(invitation.project_id)
    if Membership.objects.filter(project=project, user=user).exists():
        raise InvalidTransition("you are already a member of this project")
    membership = Membership.objects.create(project=project, user=user, role=invitation.role)
    invitation.status, invitation.ended_at = InvitationStatus.ACCEPTED, timezone.now()
    invitation.save(update_fields=["status", "ended_at"])
    _log("invitation.accepted", project, user, invitation_id=invitation.pk, role=invitation.role)
    return membership


@transaction.atomic
def invitation_accept(*, invitation_id: int, actor: Any) -> Membership:
    """Accept an invitation addressed to ``actor``'s account: they become a member.

    Raises:
        NotFound: no such invitation for ``actor``.
        InvalidTransition: it is not pending any more, it expired, or ``actor`` is already a
            member.
    """
    mine = Invitation.objects.filter(user_id=getattr(actor, "pk", None) or 0)
    return _join(_pending_for_update(mine, invitation_id, "accepted"), actor)


@transaction.atomic
def invitation_decline(*, invitation_id: int, actor: Any) -> Invitation:
    """Decline an invitation addressed to ``actor``'s account.

    Raises:
        NotFound: no such invitation for ``actor``.
        InvalidTransition: it is not pending any more, or it expired.
    """
    mine = Invitation.objects.filter(user_id=getattr(actor, "pk", None) or 0)
    invitation = _pending_for_update(mine, invitation_id, "declined")
    invitation.status, invitation.ended_at = InvitationStatus.DECLINED, timezone.now()
    invitation.save(update_fields=["status", "ended_at"])
    _log("invitation.declined", invitation.project, actor, invitation_id=invitation.pk)
    return invitation


@transaction.atomic
def invitation_revoke(*, project: Project, actor: Any, invitation_id: int) -> Invitation:
    """Revoke a pending invitation of ``project``; its link stops working.

    Raises:
        PermissionDenied: ``actor`` is not a manager of the project (nor staff).
        NotFound: no such invitation in the project.
        InvalidTransition: it is not pending any more, or it expired.
    """
    _require_manager(project, actor, "revoke invitations")
    ours = Invitation.objects.filter(project=project)
    invitation = _pending_for_update(ours, invitation_id, "revoked")
    invitation.status, invitation.ended_at = InvitationStatus.REVOKED, timezone.now()
    invitation.save(update_fields=["status", "ended_at"])
    _log("invitation.revoked", project, actor, invitation_id=invitation.pk)
    return invitation


def invitation_for_token(token: str) -> Invitation:
    """Return the pending, unexpired invitation whose join link carries ``token``.

    Raises:
        NotFound: the link is unknown, used, revoked or expired (not told apart).
    """
    invitation = (
        Invitation.objects.select_related("project")
        .filter(
            token_hash=token_hash(token),
            status=InvitationStatus.PENDING,
            expires_at__gt=timezone.now(),
        )
        .first()
        if token
        else None
    )
    if invitation is None:
        raise NotFound("this invitation link is not valid: it was used, revoked or it expired")
    return invitation


@transaction.atomic
def invitation_join(*, token: str, username: str, password: str) -> Membership:
    """Create an account from a join link and make it a member, as the invitation says.

    The account gets the invitation's e-mail address and ``password``; the link is used up.

    Raises:
        NotFound: the link is unknown, used, revoked or expired.
        InvalidInput: the username is invalid or taken (field ``username``), or the password
            fails the password validators (``password``).
    """
    found = invitation_for_token(token)
    invitation = _pending_for_update(Invitation.objects.all(), found.pk, "used")
    user_model = get_user_model()
    username = username.strip()
    user = user_model(**{user_model.USERNAME_FIELD: username}, email=invitation.email)
    try:
        user.full_clean(exclude=["password"])
    except ValidationError as exc:
        raise InvalidInput(
            " ".join(m for ms in exc.message_dict.values() for m in ms), field="username"
        ) from exc
    try:
        password_validation.validate_password(password, user)
    except ValidationError as exc:
        raise InvalidInput(" ".join(exc.messages), field="password") from exc
    user.set_password(password)
    user.save()
    return _join(invitation, user)


def membership_from_groups(*, project: Project, user: Any, role: str | None) -> str:
    """Apply what the identity provider's groups grant ``user`` in ``project`` at a sign-in.

    ``role`` is the role the groups grant (None: none). The groups own the memberships they
    made (``from_groups``): without one, a granted role makes it; with one, the role is set,
    or, when no group grants one any more, the membership is deactivated (its leases given
    back; the labels stay attributed). A membership a manager gave or changed by hand is the
    manager's: the groups leave it alone. The last-manager rule holds: a change that would take
    the project's last active manager out is skipped and logged.

    Returns:
        What happened: ``"granted"``, ``"changed"``, ``"kept"``, ``"deactivated"``,
        ``"untouched"`` or ``"refused"`` (the last-manager rule).

    Raises:
        InvalidInput: ``role`` is not a role.
    """
    if role is not None:
        _check_role(role)
    with transaction.atomic():
        project_lock(project.pk)
        membership = Membership.objects.filter(project=project, user=user).first()
        if membership is None:
            if role is None:
                return "untouched"
            Membership.objects.create(project=project, user=user, role=role, from_groups=True)
            _log("membership.from_groups", project, user, role=role)
            return "granted"
        if not membership.from_groups:
            return "untouched"
        target = (role, True) if role is not None else (membership.role, False)
        if (membership.role, membership.is_active) == target:
            return "kept"
        refusal = membership_refusal(membership, role=target[0], is_active=target[1])
        if refusal is not None:
            logger.warning(
                "membership.from_groups_refused project=%s user=%s reason=%s",
                project.slug,
                user.pk,
                refusal,
            )
            return "refused"
        membership.role, membership.is_active = target
        membership.save(update_fields=["role", "is_active"])
        if not membership.is_active:
            assignments_release_member(project=project, user_id=user.pk)
        _log("membership.from_groups", project, user, role=target[0], is_active=target[1])
        return "changed" if target[1] else "deactivated"


def invitations_accept_by_email(*, user: Any, email: str) -> list[Membership]:
    """Accept every pending, unexpired invitation sent to ``email`` on behalf of ``user``.

    For a single sign-on whose address the identity provider verified (the caller checks
    that): the person becomes a member with the invited role. An invitation to a project the
    user already belongs to (through their groups, say) stays pending.

    Returns:
        The memberships made, in the order of the invitations.
    """
    if not email:
        return []
    pending = Invitation.objects.filter(
        email__iexact=email, status=InvitationStatus.PENDING, expires_at__gt=timezone.now()
    )
    joined = []
    for invitation_id in pending.order_by("pk").values_list("pk", flat=True):
        with transaction.atomic():
            invitation = invitation_lock(Invitation.objects.all(), invitation_id)
            if invitation is None or invitation.status != InvitationStatus.PENDING:
                continue
            if Membership.objects.filter(project_id=invitation.project_id, user=user).exists():
                continue
            joined.append(_join(invitation, user))
    return joined
