"""Reads of API tokens: a user's own tokens and a token's state."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from labeling.models import ApiToken

ACTIVE, EXPIRED, REVOKED = "active", "expired", "revoked"


def api_token_list(*, user: Any) -> QuerySet[ApiToken]:
    """Return ``user``'s tokens, newest first (no other user's, whoever asks)."""
    return ApiToken.objects.filter(user=user).order_by("-created_at", "-pk")


def api_token_state(token: ApiToken, *, now: datetime | None = None) -> str:
    """Return ``"revoked"``, ``"expired"`` (at or after ``expires_at``) or ``"active"``."""
    if token.revoked_at is not None:
        return REVOKED
    if token.expires_at <= (now or timezone.now()):
        return EXPIRED
    return ACTIVE
