"""Signing in and out: the login page's options, single sign-on's two steps, logout, the recheck.

Single sign-on (``/accounts/sso/login/`` → the provider → ``/accounts/sso/callback/``) is
Authlib's authorization code flow with PKCE; the account, roles and invitations are
:mod:`labeling.services.sso`'s. A refused or failed sign-in shows the login page with the
reason (400, or 503 when the provider cannot be reached), never a 500. Logging out ends the
local session and, when the provider offers RP-initiated logout, the provider's.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import csp.middleware
import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login, logout
from django.contrib.auth.forms import AuthenticationForm
from django.db import IntegrityError
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    HttpResponseRedirect,
)
from django.shortcuts import redirect, render, resolve_url
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from labeling.exceptions import PermissionDenied
from labeling.models import SsoIdentity
from labeling.services.sso import (
    PROVIDER_ERRORS,
    SESSION_KEY,
    sso_client,
    sso_enabled,
    sso_identity_recheck,
    sso_sign_in,
)

logger = logging.getLogger(__name__)

_NEXT_KEY = "sso_next"
# What a provider's ``error`` answer (RFC 6749 section 4.1.2.1, OpenID Connect Core 3.1.2.6)
# means to the person signing in.
_PROVIDER_REFUSALS = {
    "access_denied": "the sign-in was denied at the identity provider",
    "login_required": "the identity provider asks you to sign in there first",
    "consent_required": "the identity provider needs your consent first",
    "interaction_required": "the identity provider needs you to act there first",
    "temporarily_unavailable": "the identity provider is temporarily unavailable",
    "server_error": "the identity provider failed; try again later",
}


def sign_in_options(request: HttpRequest) -> dict[str, Any]:
    """Template context: ``sign_in`` with ``sso`` (on or off), ``sso_name`` and ``password``."""
    return {
        "sign_in": {
            "sso": sso_enabled(),
            "sso_name": settings.CERTLABEL_OIDC_NAME,
            "password": settings.CERTLABEL_PASSWORD_LOGIN,
        }
    }


def _refused(request: HttpRequest, reason: str, *, status: int = 400) -> HttpResponse:
    return render(
        request,
        "registration/login.html",
        {
            "sso_error": reason,
            "form": AuthenticationForm(request),
            "next": request.session.get(_NEXT_KEY, ""),
        },
        status=status,
    )


def _safe_next(request: HttpRequest, target: str) -> str:
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return resolve_url(settings.LOGIN_REDIRECT_URL)


@never_cache
@require_GET
def sso_login(request: HttpRequest) -> HttpResponse:
    """Send the browser to the provider (state, nonce and PKCE challenge kept in the session)."""
    if not sso_enabled():
        raise Http404("single sign-on is not configured")
    request.session[_NEXT_KEY] = _safe_next(request, request.GET.get("next", ""))
    try:
        response: HttpResponse = sso_client().authorize_redirect(
            request, request.build_absolute_uri(reverse("sso-callback"))
        )
    except PROVIDER_ERRORS as exc:
        logger.warning("sso.provider_unreachable error=%s", exc)
        return _refused(
            request, "the identity provider cannot be reached; try again later", status=503
        )
    return response


@never_cache
@require_GET
def sso_callback(request: HttpRequest) -> HttpResponse:
    """The provider's answer: check the code, state and ID token, then sign the person in."""
    if not sso_enabled():
        raise Http404("single sign-on is not configured")
    if request.GET.get("error"):
        # The provider's refusal; its free-text description is not shown, since anyone can
        # send a browser here with one of their own.
        code = re.sub(r"[^a-z_]", "", request.GET["error"][:60])  # a code, never a log line
        logger.warning("sso.refused_by_provider error=%s", code)
        reason = _PROVIDER_REFUSALS.get(code, "the identity provider refused the sign-in")
        return _refused(request, f"single sign-on failed: {reason}")
    client = sso_client()
    try:
        token = client.authorize_access_token(request)
        if "userinfo" not in token:
            return _refused(request, "the provider sent no ID token (is openid in the scopes?)")
        claims = dict(token["userinfo"])
        if client.load_server_metadata().get("userinfo_endpoint"):
            extra = client.userinfo(token=token)
            if extra.get("sub") == claims["sub"]:
                claims = {**extra, **claims}
    except requests.RequestException as exc:
        logger.warning("sso.provider_unreachable error=%s", exc)
        return _refused(
            request, "the identity provider cannot be reached; try again later", status=503
        )
    except PROVIDER_ERRORS as exc:
        reason = getattr(exc, "description", None) or getattr(exc, "error", None) or str(exc)
        logger.warning("sso.refused error=%s", reason)
        if getattr(exc, "error", None) == "bad_signature":
            # The provider may have rotated its key under an ID token without a key id: read
            # its keys again, so that the next attempt is checked against the new one.
            client.fetch_jwk_set(force=True)
        return _refused(request, f"single sign-on failed: {reason}")
    try:
        signed_in = sso_sign_in(claims=claims, refresh_token=token.get("refresh_token") or "")
    except PermissionDenied as exc:
        return _refused(request, exc.message, status=403)
    except IntegrityError:
        return _refused(request, "this account was being set up at the same time; try again")
    target = request.session.pop(_NEXT_KEY, "")
    login(request, signed_in.user, backend="django.contrib.auth.backends.ModelBackend")
    request.session[SESSION_KEY] = {
        "identity": signed_in.identity.pk,
        "signed_in": time.time(),
        "checked_at": time.time(),
        "id_token": token.get("id_token", ""),
        # Without a refresh token, the session lasts as long as the ID token.
        "expires_at": float(claims.get("exp") or 0),
    }
    for slug in signed_in.joined:
        messages.success(request, f"You joined {slug} by its invitation.")
    return HttpResponseRedirect(_safe_next(request, target))


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    """End the local session; then the provider's, when it offers RP-initiated logout."""
    state = request.session.get(SESSION_KEY) or {}
    logout(request)
    if state and sso_enabled():
        try:
            client = sso_client()
            if client.load_server_metadata().get("end_session_endpoint"):
                url = client.create_logout_url(
                    post_logout_redirect_uri=request.build_absolute_uri(reverse("login")),
                    id_token_hint=state.get("id_token") or None,
                )["url"]
                return HttpResponseRedirect(url)
        except PROVIDER_ERRORS as exc:
            logger.warning("sso.logout_provider_unreachable error=%s", exc)
    return redirect(settings.LOGOUT_REDIRECT_URL)


class CspMiddleware(csp.middleware.CSPMiddleware):
    """django-csp's middleware; with single sign-on, ``form-action`` also allows the provider.

    The logout form's answer redirects to the provider's end-session page, and a browser
    checks every redirect of a form's submission against ``form-action``.
    """

    def get_policy_parts(
        self, request: HttpRequest, response: HttpResponseBase, report_only: bool = False
    ) -> csp.middleware.PolicyParts:
        """The policy of ``response``, with the provider's origin added to ``form-action``."""
        parts = super().get_policy_parts(request, response, report_only)
        if sso_enabled():
            issuer = urlsplit(settings.CERTLABEL_OIDC_ISSUER)
            update = dict(parts.update or {})
            update["form-action"] = [
                *update.get("form-action", []),
                f"{issuer.scheme}://{issuer.netloc}",
            ]
            parts.update = update
        return parts


class SsoSessionMiddleware:
    """Recheck a single sign-on session with the provider every ``CERTLABEL_OIDC_RECHECK_SECONDS``.

    A request of a session signed in through the provider and not checked for the interval
    ends the session when the identity lapsed since it signed in (any request, writes
    included). On a page load (GET or HEAD: a save never waits for the provider) the refresh
    token is also used (:func:`labeling.services.sso.sso_identity_recheck`). A refusal lapses
    the identity: every single sign-on session of the account ends at its next check, and its
    API tokens are refused until the next sign-in. Without a refresh token the session lasts
    as long as the ID token did. An unreachable provider is tried again a minute later.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # Only a page load of a browser that holds a session cookie, with single sign-on on:
        # other requests never touch the session (no Vary: Cookie on /health/live, say).
        if (
            settings.SESSION_COOKIE_NAME in request.COOKIES
            and sso_enabled()
            and SESSION_KEY in request.session
        ):
            self._recheck(request)
        return self.get_response(request)

    def _recheck(self, request: HttpRequest) -> None:
        state = request.session[SESSION_KEY]
        now = time.time()
        interval = settings.CERTLABEL_OIDC_RECHECK_SECONDS
        if now - float(state.get("checked_at", 0)) < interval:
            return
        identity = SsoIdentity.objects.filter(
            pk=state.get("identity"), user_id=request.user.pk or 0
        ).first()
        ended = identity is None or identity.lapsed_at is not None
        if identity is not None and identity.sessions_ended_at is not None:
            ended = ended or identity.sessions_ended_at.timestamp() > state.get("signed_in", 0)
        if ended or identity is None:
            outcome = "lapsed"
        elif request.method not in ("GET", "HEAD"):
            return  # a write is not held up by the provider: the next page load asks it
        else:
            outcome = sso_identity_recheck(identity.pk)
        if outcome == "no_refresh_token" and now < float(state.get("expires_at") or 0):
            outcome = "active"  # no refresh token: the ID token's lifetime is the session's
        if outcome == "active":
            request.session[SESSION_KEY] = {**state, "checked_at": now}
        elif outcome == "unknown":
            retry_in = min(60.0, interval)
            request.session[SESSION_KEY] = {**state, "checked_at": now - interval + retry_in}
        else:
            logout(request)
            messages.info(request, "Your single sign-on session ended: please sign in again.")
