"""API tokens: named, expiring, revocable; only a hash of each secret is stored.

A token's secret is shown once, when it is made; the table keeps its SHA-256 digest (the secret
is 32 random bytes, so a fast hash is as strong as a slow one) and its first characters
(``prefix``) so that a person can tell their tokens apart. A revoked token stays in the table
with ``revoked_at`` and a reason (revoked by its owner, or by a password change).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q


class TokenRevocation(models.TextChoices):
    """Why a token was revoked."""

    OWNER = "owner", "revoked by its owner"
    PASSWORD_CHANGED = "password_changed", "the password was changed"


class ApiToken(models.Model):
    """One API token of one user (``Authorization: Token <secret>``)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. 'CI export'.")
    prefix = models.CharField(max_length=8, help_text="The first characters of the secret.")
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the secret, hex.")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_reason = models.CharField(max_length=20, choices=TokenRevocation.choices, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["user", "revoked_at"], name="api_token_user_idx")]
        constraints = [
            models.CheckConstraint(
                condition=Q(expires_at__gt=F("created_at")), name="api_token_expiry_order"
            ),
            models.CheckConstraint(
                condition=Q(revoked_at__isnull=True, revoked_reason="")
                | Q(revoked_at__isnull=False, revoked_reason__in=TokenRevocation.values),
                name="api_token_revocation_consistent",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class SsoIdentity(models.Model):
    """The account an OpenID Connect subject signs in to: one per (issuer, subject).

    Accounts are found by the provider's subject, never by an e-mail address. ``refresh_token``
    (the provider's, encrypted with a key derived from ``SECRET_KEY``; empty when the provider
    issued none) lets certlabel ask the provider whether it still vouches for the person;
    ``checked_at`` is when it last said yes. ``lapsed_at`` is set when the provider refused
    (the person was deactivated there, or the provider's session ended): the account's single
    sign-on sessions end and its API tokens are refused until the person signs in again.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identities"
    )
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    refresh_token = models.TextField(blank=True)
    created_at = models.DateTimeField()
    signed_in_at = models.DateTimeField()
    checked_at = models.DateTimeField()
    lapsed_at = models.DateTimeField(null=True, blank=True)
    # The last lapse: every session signed in before it is over, even once the person signed
    # in again (a sign-in clears ``lapsed_at``, not this).
    sessions_ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_unique"),
            models.UniqueConstraint(fields=["user", "issuer"], name="sso_identity_one_per_user"),
        ]
        indexes = [models.Index(fields=["checked_at"], name="sso_identity_checked_idx")]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
