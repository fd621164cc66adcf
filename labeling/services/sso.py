"""Single sign-on through an OpenID Connect provider: who signs in, with which roles, for how long.

The protocol is Authlib's (authorization code flow with PKCE S256, a nonce and a state; the ID
token's signature, issuer, audience, expiry and nonce are checked against the provider's
discovery document and keys). What is ours:

- **Which account.** One :class:`~labeling.models.SsoIdentity` per (issuer, subject): a person
  is always found by the provider's subject. A first sign-in links an existing account only by
  an e-mail address the provider marks verified (``email_verified: true``), and never a staff
  account; otherwise it makes a new account without a password.
- **Which roles.** ``CERTLABEL_OIDC_ROLE_MAP`` maps the provider's groups to project roles,
  applied at each sign-in (:func:`labeling.services.members.membership_from_groups`); pending
  invitations to the verified address are accepted.
- **For how long.** Every ``CERTLABEL_OIDC_RECHECK_SECONDS`` the provider's refresh token is
  used (:func:`sso_identity_recheck`): a browser session checks on its next page load, and a
  periodic task checks every account, so API tokens are covered too. When the provider refuses
  (``invalid_grant``: the person was deactivated or their grant revoked), the account is made
  inactive, which ends its sessions, and its API tokens are revoked. A provider that cannot be
  reached changes nothing. The next successful sign-in reactivates the account.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import logging
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import requests
from authlib.common.errors import AuthlibBaseError
from authlib.integrations.django_client import OAuth
from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import transaction
from django.db.models import CharField
from django.utils import timezone
from joserfc.errors import JoseError

from labeling.exceptions import PermissionDenied
from labeling.locks import sso_identity_lock
from labeling.models import Project, Role, SsoIdentity, TokenRevocation
from labeling.services.members import invitations_accept_by_email, membership_from_groups
from labeling.services.tokens import api_tokens_revoke_all

logger = logging.getLogger(__name__)

#: Higher roles win when several groups grant one project.
ROLE_RANK = {Role.ANNOTATOR: 0, Role.ADJUDICATOR: 1, Role.MANAGER: 2}
#: Where a signed-in session keeps its single sign-on state.
SESSION_KEY = "sso"


def sso_enabled() -> bool:
    """Whether single sign-on is configured (``CERTLABEL_OIDC_ISSUER`` and client id)."""
    return bool(settings.CERTLABEL_OIDC_ISSUER and settings.CERTLABEL_OIDC_CLIENT_ID)


@dataclass(frozen=True)
class RoleGrant:
    """An entry of ``CERTLABEL_OIDC_ROLE_MAP``: members of ``group`` get ``role`` in ``project``."""

    group: str
    project: str
    role: str


def role_map() -> list[RoleGrant]:
    """Parse ``CERTLABEL_OIDC_ROLE_MAP`` (``GROUP=PROJECT_SLUG:ROLE`` entries).

    Raises:
        ImproperlyConfigured: an entry is malformed or names an unknown role (the entry is
            quoted).
    """
    grants = []
    for entry in settings.CERTLABEL_OIDC_ROLE_MAP:
        match = re.fullmatch(r"\s*([^=]+?)\s*=\s*([-\w]+)\s*:\s*(\w+)\s*", entry)
        if match is None or match[3] not in Role.values:
            raise ImproperlyConfigured(
                f"CERTLABEL_OIDC_ROLE_MAP: {entry!r} is not GROUP=PROJECT_SLUG:ROLE with ROLE "
                f"one of {', '.join(Role.values)}"
            )
        grants.append(RoleGrant(group=match[1], project=match[2], role=match[3]))
    return grants


@functools.lru_cache(maxsize=4)
def _client(issuer: str, client_id: str, client_secret: str, scopes: str, timeout: float) -> Any:
    oauth = OAuth()
    return oauth.register(
        name="sso",
        server_metadata_url=f"{issuer}/.well-known/openid-configuration",
        client_id=client_id,
        client_secret=client_secret,
        client_kwargs={"scope": scopes, "code_challenge_method": "S256", "timeout": timeout},
    )


def sso_client() -> Any:
    """The Authlib client of the configured provider (its discovery document is read once).

    Raises:
        ImproperlyConfigured: single sign-on is not configured.
    """
    if not sso_enabled():
        raise ImproperlyConfigured("single sign-on needs CERTLABEL_OIDC_ISSUER and _CLIENT_ID")
    return _client(
        settings.CERTLABEL_OIDC_ISSUER,
        settings.CERTLABEL_OIDC_CLIENT_ID,
        settings.CERTLABEL_OIDC_CLIENT_SECRET,
        settings.CERTLABEL_OIDC_SCOPES,
        settings.CERTLABEL_OIDC_TIMEOUT,
    )


#: What a failed exchange with the provider raises: its own refusals (Authlib's errors, with
#: ``.error``), the ID token's failed checks, and the network.
PROVIDER_ERRORS = (
    AuthlibBaseError,
    JoseError,
    requests.RequestException,
    ValueError,
    KeyError,
)


def _fernet() -> Fernet:
    digest = hashlib.sha256(f"certlabel-sso:{settings.SECRET_KEY}".encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def _seal(refresh_token: str) -> str:
    return _fernet().encrypt(refresh_token.encode()).decode() if refresh_token else ""


def _unseal(sealed: str) -> str:
    """The refresh token; empty when none was kept or ``SECRET_KEY`` changed since."""
    try:
        return _fernet().decrypt(sealed.encode()).decode() if sealed else ""
    except InvalidToken:
        return ""


@dataclass(frozen=True)
class SignIn:
    """What :func:`sso_sign_in` did: the account, and the roles and invitations applied."""

    user: Any
    identity: SsoIdentity
    created: bool
    roles: dict[str, str]
    joined: list[str]


def _verified_email(claims: dict[str, Any]) -> str:
    email = claims.get("email")
    verified = claims.get("email_verified") is True or claims.get("email_verified") == "true"
    return email.strip() if isinstance(email, str) and verified else ""


def _new_username(claims: dict[str, Any], email: str) -> str:
    """A free, valid username from ``preferred_username``, the address or the subject."""
    users = get_user_model()
    field = users._meta.get_field(users.USERNAME_FIELD)
    assert isinstance(field, CharField)  # the username of Django's user model
    longest = (field.max_length or 150) - 4
    preferred = claims.get("preferred_username")
    candidates = [preferred if isinstance(preferred, str) else "", email.split("@")[0]]
    subject_hash = hashlib.sha256(str(claims["sub"]).encode()).hexdigest()[:10]
    for base in [*candidates, f"sso-{subject_hash}"]:
        base = re.sub(r"[^\w.@+-]", "", base)[:longest]
        if not base:
            continue
        for suffix in ["", *(f"-{n}" for n in range(2, 100))]:
            name = base + suffix
            try:
                for validator in field.validators:
                    validator(name)
            except ValidationError:
                break
            if not users.objects.filter(**{f"{users.USERNAME_FIELD}__iexact": name}).exists():
                return name
    raise PermissionDenied("no free username could be made for this account")


def _account(issuer: str, claims: dict[str, Any], email: str) -> tuple[Any, SsoIdentity | None]:
    """The account of (issuer, subject), else one to link by verified address, else None."""
    identity = sso_identity_lock(issuer, str(claims["sub"]))
    if identity is not None:
        return identity.user, identity
    if not email:
        return None, None
    matches = list(
        get_user_model()
        .objects.filter(email__iexact=email, is_staff=False, is_superuser=False)
        .exclude(sso_identities__issuer=issuer)[:2]
    )
    return (matches[0] if len(matches) == 1 else None), None


def _groups(claims: dict[str, Any]) -> set[str]:
    groups = claims.get(settings.CERTLABEL_OIDC_GROUPS_CLAIM)
    if isinstance(groups, str):
        return {groups}
    if isinstance(groups, list):
        return {g for g in groups if isinstance(g, str)}
    return set()


def _roles_from_groups(user: Any, claims: dict[str, Any]) -> dict[str, str]:
    """Apply the role map to ``user``'s groups; return the role granted per project slug."""
    grants = role_map()
    if not grants:
        return {}
    groups = _groups(claims)
    granted: dict[str, str] = {}
    for grant in grants:
        if grant.group in groups:
            best = granted.get(grant.project)
            if best is None or ROLE_RANK[Role(grant.role)] > ROLE_RANK[Role(best)]:
                granted[grant.project] = grant.role
    mapped = {grant.project for grant in grants}
    projects = {p.slug: p for p in Project.objects.filter(slug__in=mapped)}
    for slug in sorted(mapped - set(projects)):
        logger.warning("sso.role_map_unknown_project project=%s", slug)
    for slug, project in sorted(projects.items()):
        membership_from_groups(project=project, user=user, role=granted.get(slug))
    return {slug: role for slug, role in granted.items() if slug in projects}


def sso_sign_in(*, claims: dict[str, Any], refresh_token: str = "") -> SignIn:
    """Find or make the account of a verified ID token's ``claims``; apply groups and invitations.

    Args:
        claims: the ID token's claims (checked by the caller: signature, issuer, audience,
            expiry, nonce), merged with the userinfo endpoint's; needs ``iss`` and ``sub``.
        refresh_token: the provider's refresh token, kept (encrypted) for the rechecks.

    Returns:
        The account, its identity, whether it was made now, the roles the groups granted
        (project slug → role) and the projects joined through invitations.

    Concurrency: the account's part is one transaction holding the identity's row; two
    first sign-ins of one subject at once make one account (the unique constraint).

    Raises:
        PermissionDenied: the account was deactivated here (not by the provider), or no
            username could be made.
    """
    issuer, subject = str(claims["iss"]), str(claims["sub"])
    email = _verified_email(claims)
    now = timezone.now()
    users = get_user_model()
    with transaction.atomic():
        user, identity = _account(issuer, claims, email)
        created = user is None
        if user is None:
            user = users(**{users.USERNAME_FIELD: _new_username(claims, email)}, email=email)
            user.set_unusable_password()
            user.save()
        if not user.is_active:
            if identity is None or identity.deactivated_at is None:
                raise PermissionDenied("this account is deactivated here; ask an administrator")
            user.is_active = True
            user.save(update_fields=["is_active"])
        if email and user.email != email:
            user.email = email
            user.save(update_fields=["email"])
        if identity is None:
            identity = SsoIdentity(
                user=user, issuer=issuer, subject=subject, created_at=now, checked_at=now
            )
        identity.refresh_token = _seal(refresh_token)
        identity.signed_in_at = identity.checked_at = now
        identity.deactivated_at = None
        identity.save()
    roles = _roles_from_groups(user, claims)
    joined = [m.project.slug for m in invitations_accept_by_email(user=user, email=email)]
    logger.info(
        "sso.signed_in user=%s created=%s roles=%s joined=%s",
        user.pk,
        created,
        ",".join(f"{k}:{v}" for k, v in sorted(roles.items())) or "-",
        ",".join(joined) or "-",
    )
    return SignIn(user=user, identity=identity, created=created, roles=roles, joined=joined)


def sso_deactivate(identity: SsoIdentity, *, reason: str) -> None:
    """Make ``identity``'s account inactive (its sessions end) and revoke its API tokens."""
    with transaction.atomic():
        identity.deactivated_at = identity.checked_at = timezone.now()
        identity.refresh_token = ""
        identity.save(update_fields=["deactivated_at", "checked_at", "refresh_token"])
        user = identity.user
        user.is_active = False
        user.save(update_fields=["is_active"])
        api_tokens_revoke_all(user=user, reason=TokenRevocation.DEACTIVATED)
    logger.warning("sso.deactivated user=%s reason=%s", identity.user_id, reason)


def _same_issuer(issuer: str) -> bool:
    """Whether ``issuer`` is the configured provider's (a trailing slash aside: Auth0's has one)."""
    return issuer.rstrip("/") == settings.CERTLABEL_OIDC_ISSUER.rstrip("/")


def sso_identity_recheck(identity: SsoIdentity) -> str:
    """Ask the provider whether ``identity`` may still sign in, with its refresh token.

    Returns:
        ``"active"`` (the provider answered with tokens; a rotated refresh token is kept),
        ``"deactivated"`` (the provider refused the grant: :func:`sso_deactivate` ran),
        ``"unknown"`` (the provider could not be reached, or answered an error that says
        nothing of the person: nothing changes), or ``"no_refresh_token"`` (the provider
        issued none, or the identity is another provider's: only a new sign-in can tell).
    """
    refresh_token = _unseal(identity.refresh_token)
    if not refresh_token or not sso_enabled() or not _same_issuer(identity.issuer):
        return "no_refresh_token"
    try:
        token = sso_client().fetch_access_token(
            grant_type="refresh_token", refresh_token=refresh_token
        )
    except PROVIDER_ERRORS as exc:
        if getattr(exc, "error", None) == "invalid_grant":
            sso_deactivate(identity, reason=str(getattr(exc, "description", "") or exc))
            return "deactivated"
        logger.warning("sso.recheck_failed user=%s error=%s", identity.user_id, exc)
        return "unknown"
    identity.checked_at = timezone.now()
    fields = ["checked_at"]
    if token.get("refresh_token") and token["refresh_token"] != refresh_token:
        identity.refresh_token = _seal(token["refresh_token"])
        fields.append("refresh_token")
    identity.save(update_fields=fields)
    return "active"


def sso_recheck_due(*, limit: int = 500) -> dict[str, int]:
    """Recheck every active identity not checked for ``CERTLABEL_OIDC_RECHECK_SECONDS``.

    For the periodic task: it covers the accounts that use API tokens and no browser.

    Returns:
        How many rechecks ended in each outcome of :func:`sso_identity_recheck`.
    """
    if not sso_enabled():
        return {}
    cutoff = timezone.now() - timedelta(seconds=settings.CERTLABEL_OIDC_RECHECK_SECONDS)
    due = (
        SsoIdentity.objects.select_related("user")
        .filter(
            issuer__in=[settings.CERTLABEL_OIDC_ISSUER, settings.CERTLABEL_OIDC_ISSUER + "/"],
            deactivated_at__isnull=True,
            checked_at__lt=cutoff,
            user__is_active=True,
        )
        .exclude(refresh_token="")
        .order_by("checked_at")[:limit]
    )
    outcomes: dict[str, int] = {}
    for identity in due:
        outcome = sso_identity_recheck(identity)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return outcomes
