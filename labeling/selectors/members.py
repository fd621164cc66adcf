"""Reads of invitations: a project's (for its managers) and an account's own (to accept)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from labeling.models import Invitation, InvitationStatus, Project


def invitation_list(*, project: Project) -> QuerySet[Invitation]:
    """Return ``project``'s invitations, newest first, with who sent them. One query.

    Each row's ``status`` is as stored: a pending invitation past ``expires_at`` is expired
    (``Invitation.expires_at``), which the pages and the API show. The rows never say whether
    the invitee has an account.
    """
    return Invitation.objects.filter(project=project).select_related("invited_by")


def invitations_for_user(*, user: Any) -> QuerySet[Invitation]:
    """Return ``user``'s pending unexpired invitations, newest first, with project and inviter."""
    return Invitation.objects.filter(
        user_id=getattr(user, "pk", None) or 0,
        status=InvitationStatus.PENDING,
        expires_at__gt=timezone.now(),
    ).select_related("project", "invited_by")
