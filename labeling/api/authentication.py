"""The API's token authentication: ``Authorization: Token <secret>`` of a live ``ApiToken``.

Its own module, importing no view: DRF reads ``DEFAULT_AUTHENTICATION_CLASSES`` while
``rest_framework.views`` is being imported. An unknown, revoked or expired token is a 401 with
the error contract's body and a stable ``code``: ``token_invalid``, ``token_revoked`` (with the
reason), ``token_expired`` (with the time) or ``token_suspended`` (a single sign-on account the
identity provider no longer vouches for), so a script can tell its user what to do.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from labeling.exceptions import ErrorCode
from labeling.models import ApiToken
from labeling.rows import raw_first
from labeling.services.tokens import api_token_touch, token_digest


def _renew() -> str:
    """Where a new token is made (the token endpoint takes passwords, which may be off)."""
    if settings.CERTLABEL_PASSWORD_LOGIN:
        return "on the My account page or at POST /api/auth/token/"
    return "on the My account page"


class ApiTokenAuthentication(TokenAuthentication):
    """DRF token authentication over hashed, expiring, revocable tokens.

    The header is DRF's (``Token <secret>``); the secret is looked up by its SHA-256 digest.
    ``request.auth`` is the ``ApiToken``. A use is recorded in ``last_used_at`` (at most once a
    minute per token).
    """

    model = ApiToken

    def authenticate_credentials(self, key: str) -> tuple[Any, ApiToken]:
        """Return ``(user, token)`` for a live token.

        Raises:
            AuthenticationFailed: the token is unknown, revoked or expired, or its user is
                inactive (HTTP 401).
        """
        # Every API request runs these two reads: plain statements (labeling/rows.py), the
        # token by its unique digest, then its user.
        token = raw_first(
            ApiToken, "SELECT * FROM labeling_apitoken WHERE digest = %s", [token_digest(key)]
        )
        if token is None:
            raise AuthenticationFailed("invalid token", code=ErrorCode.TOKEN_INVALID)
        if token.revoked_at is not None:
            raise AuthenticationFailed(
                f"this token was revoked ({token.get_revoked_reason_display()}); "
                f"make a new one {_renew()}",
                code=ErrorCode.TOKEN_REVOKED,
            )
        if token.expires_at <= timezone.now():
            raise AuthenticationFailed(
                f"this token expired at {token.expires_at.isoformat()}; make a new one {_renew()}",
                code=ErrorCode.TOKEN_EXPIRED,
            )
        users = get_user_model()
        # The user, and whether the identity provider stopped vouching for them (single
        # sign-on: labeling.services.sso), in one statement.
        # Only an identity of the configured provider counts: one of a former provider, or
        # of none (single sign-on off), cannot be signed in to again.
        issuer = settings.CERTLABEL_OIDC_ISSUER.rstrip("/")
        user = raw_first(
            users,
            f"SELECT u.*, EXISTS (SELECT 1 FROM labeling_ssoidentity s WHERE s.user_id = u.id"  # noqa: S608 (a model's table)
            f" AND s.lapsed_at IS NOT NULL AND s.issuer IN (%s, %s)) AS sso_lapsed"
            f" FROM {users._meta.db_table} u WHERE u.id = %s",
            [issuer, issuer + "/", token.user_id],
        )
        if user is None or not user.is_active:
            raise AuthenticationFailed("user inactive or deleted", code=ErrorCode.TOKEN_INVALID)
        if getattr(user, "sso_lapsed", False):  # the EXISTS column above
            raise AuthenticationFailed(
                "the identity provider no longer vouches for this account (deactivated there, "
                "or its session there ended): sign in through single sign-on again to use this "
                "token",
                code=ErrorCode.TOKEN_SUSPENDED,
            )
        token.user = user
        api_token_touch(token)
        return user, token
