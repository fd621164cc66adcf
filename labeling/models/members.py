"""Project members and invitations."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from labeling.models.catalog import Project, Role


class Membership(models.Model):
    """A user's role in a project; one role per (project, user)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=20, choices=Role.choices)
    # A deactivated member keeps the row (and their labels stay attributed) but has no role:
    # they see nothing of the project and hold no lease.
    is_active = models.BooleanField(default=True)
    # The role comes from the identity provider's groups (CERTLABEL_OIDC_ROLE_MAP): each sign-in
    # sets it, and deactivates it when the person left every group that grants one.
    from_groups = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_unique_user"),
            models.CheckConstraint(condition=Q(role__in=Role.values), name="membership_role_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.user} · {self.role} · {self.project.slug}"


class InvitationStatus(models.TextChoices):
    """Where an invitation is; only a pending one can be accepted, declined or revoked."""

    PENDING = "pending", "pending"
    ACCEPTED = "accepted", "accepted"
    DECLINED = "declined", "declined"
    REVOKED = "revoked", "revoked"


class Invitation(models.Model):
    """An offer of a role in a project; nobody becomes a member until they accept it.

    ``user`` is the invited account when the invitee named one that exists (it accepts on its
    project list); otherwise ``user`` is null and ``email`` receives a one-time join link whose
    token is stored only as its SHA-256 (``token_hash``). ``invitee`` is what the manager typed
    (a username or an e-mail address). An invitation past ``expires_at`` grants nothing.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="invitations")
    invitee = models.CharField(max_length=254)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="invitations",
    )
    email = models.EmailField(blank=True)
    role = models.CharField(max_length=20, choices=Role.choices)
    token_hash = models.CharField(max_length=64, blank=True)
    status = models.CharField(
        max_length=10, choices=InvitationStatus.choices, default=InvitationStatus.PENDING
    )
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(condition=Q(role__in=Role.values), name="invitation_role_valid"),
            models.CheckConstraint(
                condition=Q(status__in=InvitationStatus.values), name="invitation_status_valid"
            ),
            models.UniqueConstraint(
                fields=["token_hash"],
                condition=~Q(token_hash=""),
                name="invitation_unique_token",
            ),
        ]
        indexes = [models.Index(fields=["user", "status"], name="invitation_user_status")]

    def __str__(self) -> str:
        return f"{self.invitee} · {self.role} · {self.project.slug} · {self.state}"

    @property
    def state(self) -> str:
        """The status as shown: ``expired`` for a pending invitation past ``expires_at``."""
        if self.status == InvitationStatus.PENDING and self.expires_at <= timezone.now():
            return "expired"
        return str(self.status)
