"""API tokens: create (the secret is returned once), revoke, and revoke all of a user's.

Every user manages their own tokens only. A password change or reset revokes all of the user's
tokens (:func:`password_change_revokes_tokens`, a ``pre_save`` receiver of the user model, so
every way of setting a password is covered: the password-change and reset pages, the admin,
``manage.py changepassword``). Expired tokens are refused by the authentication
(``labeling.tokens.ApiTokenAuthentication``) and stay listed until revoked.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from labeling.exceptions import InvalidInput, NotFound
from labeling.models import ApiToken, TokenRevocation

#: Lifetime of a token when none is chosen, and the longest allowed, in days.
TOKEN_DEFAULT_DAYS = 30
TOKEN_MAX_DAYS = 365
TOKEN_NAME_MAX = 100
#: Characters of the secret kept in clear to tell tokens apart.
TOKEN_PREFIX_LENGTH = 8


@dataclass(frozen=True)
class CreatedToken:
    """A token just made: its row and its secret (never stored; shown to the owner once)."""

    token: ApiToken
    secret: str


def token_digest(secret: str) -> str:
    """Return the stored digest of ``secret``: SHA-256, 64 hex characters."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def api_token_create(
    *, user: Any, name: str, expires_in_days: int = TOKEN_DEFAULT_DAYS
) -> CreatedToken:
    """Make a new API token for ``user``.

    Args:
        user: the owner (the token acts as this user).
        name: what the token is for, 1-100 characters after stripping spaces.
        expires_in_days: lifetime in days, 1 to ``TOKEN_MAX_DAYS``.

    Returns:
        The row and the secret (43 URL-safe characters), which is not stored anywhere.

    Raises:
        InvalidInput: an empty or too long name, or a lifetime out of range (``field`` names it).
    """
    name = (name or "").strip()
    if not name:
        raise InvalidInput("give the token a name", field="name")
    if len(name) > TOKEN_NAME_MAX:
        raise InvalidInput(f"at most {TOKEN_NAME_MAX} characters", field="name")
    if (
        isinstance(expires_in_days, bool)
        or not isinstance(expires_in_days, int)
        or not 1 <= expires_in_days <= TOKEN_MAX_DAYS
    ):
        raise InvalidInput(f"the lifetime is 1 to {TOKEN_MAX_DAYS} days", field="expires_in_days")
    secret = secrets.token_urlsafe(32)
    now = timezone.now()
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=name,
            prefix=secret[:TOKEN_PREFIX_LENGTH],
            digest=token_digest(secret),
            created_at=now,
            expires_at=now + timedelta(days=expires_in_days),
        )
    return CreatedToken(token=token, secret=secret)


def api_token_revoke(*, actor: Any, token_id: int) -> ApiToken:
    """Revoke one of ``actor``'s tokens (revoking a revoked token changes nothing).

    Raises:
        NotFound: no such token of ``actor`` (another user's token is not found either).
    """
    with transaction.atomic():
        token = ApiToken.objects.filter(user=actor, pk=token_id).first()
        if token is None:
            raise NotFound(f"no token {token_id}")
        # conditional: a concurrent revocation (a password change) keeps its time and reason
        ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now(), revoked_reason=TokenRevocation.OWNER
        )
        token.refresh_from_db()
    return token


def api_tokens_revoke_all(*, user: Any, reason: str) -> int:
    """Revoke every live token of ``user`` with ``reason``; return how many were revoked."""
    return ApiToken.objects.filter(user=user, revoked_at__isnull=True).update(
        revoked_at=timezone.now(), revoked_reason=reason
    )


def api_token_touch(token: ApiToken, *, every: timedelta = timedelta(minutes=1)) -> None:
    """Record that ``token`` was used now (at most one write per ``every``)."""
    now = timezone.now()
    if token.last_used_at is not None and now - token.last_used_at < every:
        return
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    token.last_used_at = now


def password_change_revokes_tokens(sender: Any, instance: Any, **kwargs: Any) -> None:
    """``pre_save`` of the user model: a changed password hash revokes the user's tokens.

    Connected in ``labeling.apps``. A new user has no tokens; a save that keeps the hash (a
    login's ``last_login``) revokes nothing, nor does the re-hash of the same password that
    ``check_password`` saves when the hasher's parameters changed (it clears ``_password``, the
    raw password ``set_password`` keeps until the save, and saves the password field alone).
    """
    if instance.pk is None or kwargs.get("raw"):
        return
    update_fields = kwargs.get("update_fields")
    if update_fields is not None and "password" not in update_fields:
        return
    stored = sender.objects.filter(pk=instance.pk).values_list("password", flat=True).first()
    if stored is None or stored == instance.password:
        return
    rehash = getattr(instance, "_password", None) is None and set(update_fields or ()) == {
        "password"
    }
    if not rehash:
        api_tokens_revoke_all(user=instance, reason=TokenRevocation.PASSWORD_CHANGED)
