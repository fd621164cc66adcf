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
  periodic task checks every identity, so API tokens are covered too. When the provider refuses
  it (``invalid_grant``: the person was deactivated there, or the provider's session ended),
  the identity *lapses*: its single sign-on sessions end and the account's API tokens are
  refused until the person signs in again, which only the provider can allow. Nothing is
  revoked for good (a provider that lost its sessions costs a sign-in, not the tokens), and
  ``is_active`` stays the administrators' own switch. An unreachable provider changes nothing.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import logging
import re
import time
import unicodedata
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import requests
from authlib.common.errors import AuthlibBaseError
from authlib.integrations.django_client import OAuth
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import CharField
from django.utils import timezone
from joserfc.errors import JoseError

from labeling.exceptions import PermissionDenied
from labeling.locks import sso_identity_lock
from labeling.models import Project, Role, SsoIdentity
from labeling.services.members import invitations_accept_by_email, membership_from_groups

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


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(f"group {repeated[0]!r} is given twice")
    return dict(pairs)


def _role_map_entries() -> list[tuple[str, str]]:
    """``(group, "PROJECT_SLUG:ROLE")`` pairs of ``CERTLABEL_OIDC_ROLE_MAP``, in order.

    Comma-separated ``GROUP=PROJECT_SLUG:ROLE`` entries, or a JSON object from group to one
    ``"PROJECT_SLUG:ROLE"`` or a list of them (for group names holding ``,`` or ``=``, such as
    LDAP distinguished names).
    """
    raw = settings.CERTLABEL_OIDC_ROLE_MAP.strip()
    if raw.startswith("{"):
        try:
            mapping = json.loads(raw, object_pairs_hook=_unique_keys)
        except (json.JSONDecodeError, ValueError) as exc:
            raise ImproperlyConfigured(f"CERTLABEL_OIDC_ROLE_MAP: invalid JSON ({exc})") from exc
        return [
            (str(group), str(grant))
            for group, grants in mapping.items()
            for grant in (grants if isinstance(grants, list) else [grants])
        ]
    entries = []
    for entry in filter(None, (e.strip() for e in raw.split(","))):
        group, _, grant = entry.rpartition("=")
        entries.append((group, grant if group else entry))
    return entries


def role_map() -> list[RoleGrant]:
    """Parse ``CERTLABEL_OIDC_ROLE_MAP`` (see :func:`_role_map_entries` for its two forms).

    Raises:
        ImproperlyConfigured: an entry is malformed or names an unknown role (the entry is
            quoted).
    """
    grants = []
    for group, grant in _role_map_entries():
        match = re.fullmatch(r"\s*([-\w]+)\s*:\s*(\w+)\s*", grant)
        if not group.strip() or match is None or match[2] not in Role.values:
            raise ImproperlyConfigured(
                f"CERTLABEL_OIDC_ROLE_MAP: {group + '=' + grant!r} is not GROUP=PROJECT_SLUG:ROLE "
                f"with ROLE one of {', '.join(Role.values)}"
            )
        grants.append(RoleGrant(group=group.strip(), project=match[1], role=match[2]))
    return grants


@functools.lru_cache(maxsize=4)
def _client(
    issuer: str, client_id: str, client_secret: str, scopes: str, timeout: float, epoch: int
) -> Any:
    oauth = OAuth()
    return oauth.register(
        name="sso",
        server_metadata_url=f"{issuer}/.well-known/openid-configuration",
        client_id=client_id,
        client_secret=client_secret,
        client_kwargs={
            "scope": scopes,
            "code_challenge_method": "S256",
            "default_timeout": timeout,
        },
    )


def sso_client_forget() -> None:
    """Forget the cached provider clients, with their discovery documents and keys.

    For a provider replaced at the same address (the tests start one per test on a free port,
    which a later provider may take again).
    """
    _client.cache_clear()


#: Seconds a process keeps the provider's discovery document and signing keys; then they are
#: read again, so a key the provider rotated is picked up.
METADATA_SECONDS = 3600


def sso_client() -> Any:
    """The Authlib client of the configured provider (discovery and keys read once an hour).

    Every request to the provider waits at most ``CERTLABEL_OIDC_TIMEOUT`` seconds.

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
        int(time.time() // METADATA_SECONDS),
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


def _fernet() -> MultiFernet:
    """Keys from ``SECRET_KEY`` (encrypts) and ``SECRET_KEY_FALLBACKS`` (still decrypt)."""
    keys = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return MultiFernet(
        [
            Fernet(base64.urlsafe_b64encode(hashlib.sha256(f"certlabel-sso:{k}".encode()).digest()))
            for k in keys
        ]
    )


def _seal(refresh_token: str) -> str:
    return _fernet().encrypt(refresh_token.encode()).decode() if refresh_token else ""


def _unseal(sealed: str) -> str | None:
    """The refresh token; empty when none was kept; None when no key reads it any more."""
    try:
        return _fernet().decrypt(sealed.encode()).decode() if sealed else ""
    except InvalidToken:
        return None


@dataclass(frozen=True)
class SignIn:
    """What :func:`sso_sign_in` did: the account, and the roles and invitations applied."""

    user: Any
    identity: SsoIdentity
    created: bool
    roles: dict[str, str]
    joined: list[str]


def _verified_email(claims: dict[str, Any]) -> str:
    """The address when the provider marks it verified and it is a valid address, else ""."""
    email = claims.get("email")
    verified = claims.get("email_verified") is True or claims.get("email_verified") == "true"
    if not (isinstance(email, str) and verified) or len(email.strip()) > 254:
        return ""
    try:
        validate_email(email.strip())
    except ValidationError:
        return ""
    return email.strip()


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
        base = re.sub(r"[^\w.@+-]", "", unicodedata.normalize("NFKC", base))[:longest]
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
        PermissionDenied: the account is deactivated here (``is_active`` false: the
            administrators' switch), the subject is unusable (empty, over 255 characters, a
            NUL), or no username could be made.
    """
    issuer, subject = str(claims["iss"]), str(claims["sub"])
    if not 0 < len(subject) <= 255 or "\x00" in subject or not 0 < len(issuer) <= 255:
        raise PermissionDenied("the provider's subject or issuer is not usable here")
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
            raise PermissionDenied("this account is deactivated here; ask an administrator")
        if email and user.email != email:
            user.email = email
            user.save(update_fields=["email"])
        if identity is None:
            identity = SsoIdentity(
                user=user, issuer=issuer, subject=subject, created_at=now, checked_at=now
            )
        identity.refresh_token = _seal(refresh_token)
        identity.signed_in_at = identity.checked_at = now
        identity.lapsed_at = None
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


def _lapse(identity_id: int, *, reason: str) -> str:
    """Record that the provider no longer vouches for an identity; its sessions are over."""
    now = timezone.now()
    SsoIdentity.objects.filter(pk=identity_id).update(
        lapsed_at=now, sessions_ended_at=now, checked_at=now, refresh_token=""
    )
    logger.warning("sso.lapsed identity=%s reason=%s", identity_id, reason)
    return "lapsed"


def _same_issuer(issuer: str) -> bool:
    """Whether ``issuer`` is the configured provider's (a trailing slash aside: Auth0's has one)."""
    return issuer.rstrip("/") == settings.CERTLABEL_OIDC_ISSUER.rstrip("/")


def _current_claims(client: Any, token: dict[str, Any], subject: str) -> dict[str, Any] | None:
    """The person's claims now, from the userinfo endpoint; None when it cannot tell."""
    try:
        if not client.load_server_metadata().get("userinfo_endpoint"):
            return None
        claims = dict(client.userinfo(token=token))
    except PROVIDER_ERRORS as exc:
        logger.warning("sso.userinfo_failed error=%s", exc)
        return None
    return claims if claims.get("sub") == subject else None


def sso_identity_recheck(identity_id: int) -> str:
    """Ask the provider whether it still vouches for an identity, with its refresh token.

    When it does, the groups it reports now (userinfo) are applied as at a sign-in, so a
    person who left a group loses its role at the next check, not only at the next sign-in.

    Concurrency: one caller at a time asks about an identity (a compare-and-set on
    ``checked_at``; the others answer ``"active"`` at once), so a refresh token is never sent
    twice (a provider that rotates them would take the second use for a stolen token), and no
    database transaction is open while the provider is asked (SQLite's single writer is never
    held for the provider's timeout). A check that finds the identity checked in the last
    ``min(60, CERTLABEL_OIDC_RECHECK_SECONDS)`` seconds asks nothing.

    Returns:
        ``"active"`` (the provider answered with tokens; the refresh token it returned, or the
        old one, is stored again under the current key), ``"lapsed"`` (the provider refused the
        grant, or had refused it before, or no key reads the stored token), ``"unknown"`` (the
        provider could not be reached, or answered an error that says nothing of the person:
        nothing changes and the check is retried within a minute), or ``"no_refresh_token"``
        (none was issued, the identity is another provider's, or single sign-on is off).
    """
    identity = SsoIdentity.objects.select_related("user").filter(pk=identity_id).first()
    if identity is None or identity.lapsed_at is not None:
        return "lapsed"
    if not sso_enabled() or not _same_issuer(identity.issuer) or not identity.refresh_token:
        return "no_refresh_token"
    interval = settings.CERTLABEL_OIDC_RECHECK_SECONDS
    now = timezone.now()
    if interval and identity.checked_at > now - timedelta(seconds=min(60.0, interval)):
        return "active"
    claimed = SsoIdentity.objects.filter(
        pk=identity_id, checked_at=identity.checked_at, lapsed_at__isnull=True
    ).update(checked_at=now)
    if not claimed:
        return "active"  # another request is asking, or just asked
    refresh_token = _unseal(identity.refresh_token)
    if not refresh_token:
        return _lapse(identity_id, reason="no key reads the stored refresh token (SECRET_KEY)")
    client = sso_client()
    try:
        token = client.fetch_access_token(grant_type="refresh_token", refresh_token=refresh_token)
    except PROVIDER_ERRORS as exc:
        if getattr(exc, "error", None) == "invalid_grant":
            return _lapse(identity_id, reason=str(getattr(exc, "description", "") or exc))
        logger.warning("sso.recheck_failed identity=%s error=%s", identity_id, exc)
        retry = now - timedelta(seconds=interval) + timedelta(seconds=min(60.0, interval))
        SsoIdentity.objects.filter(pk=identity_id, checked_at=now).update(checked_at=retry)
        return "unknown"
    SsoIdentity.objects.filter(pk=identity_id, lapsed_at__isnull=True).update(
        refresh_token=_seal(token.get("refresh_token") or refresh_token),
        checked_at=timezone.now(),
    )
    claims = _current_claims(client, token, identity.subject)
    if claims is not None and settings.CERTLABEL_OIDC_GROUPS_CLAIM in claims:
        _roles_from_groups(identity.user, claims)
    return "active"


def sso_recheck_due(*, limit: int = 500) -> dict[str, int]:
    """Recheck every identity not checked for ``CERTLABEL_OIDC_RECHECK_SECONDS``, oldest first.

    For the periodic task: it covers the accounts that use API tokens and no browser.

    Returns:
        How many rechecks ended in each outcome of :func:`sso_identity_recheck`.
    """
    if not sso_enabled():
        return {}
    issuer = settings.CERTLABEL_OIDC_ISSUER.rstrip("/")
    cutoff = timezone.now() - timedelta(seconds=settings.CERTLABEL_OIDC_RECHECK_SECONDS)
    due = (
        SsoIdentity.objects.filter(
            issuer__in=[issuer, issuer + "/"], lapsed_at__isnull=True, checked_at__lt=cutoff
        )
        .exclude(refresh_token="")
        .order_by("checked_at")
        .values_list("pk", flat=True)[:limit]
    )
    outcomes: dict[str, int] = {}
    for identity_id in list(due):
        outcome = sso_identity_recheck(identity_id)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return outcomes
