"""Single sign-on against a real OpenID Connect provider process (tests/sso_provider.py).

Every sign-in here runs the whole flow: the login redirect (PKCE, state, nonce), the provider's
sign-in page, the callback's code exchange and ID token check, then the account, roles and
invitations. The refusals sign ID tokens with the provider's own key, so only the claim that
is wrong (audience, expiry, nonce, issuer) or the tampered signature refuses them.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from labeling.models import ApiToken, Assignment, Invitation, Membership, Role, SsoIdentity
from labeling.services import item_claim_next, membership_set, project_create
from labeling.services.members import invitation_create, membership_deactivate
from labeling.services.sso import role_map, sso_client, sso_client_forget, sso_recheck_due
from labeling.services.tokens import api_token_create
from tests.conftest import import_native
from tests.factories import UserFactory, start_labelling, work_record
from tests.sso_provider import Provider, provider_running

pytestmark = pytest.mark.django_db

ROLE_MAP = (
    "study-annotators=study:annotator, study-leads=study:manager,study-reviewers=study:adjudicator"
)


@pytest.fixture
def provider() -> Iterator[Provider]:
    with provider_running() as running:
        yield running


@pytest.fixture
def sso(settings: Any, provider: Provider) -> Provider:
    """Single sign-on configured against ``provider``, with the role map above.

    The client cache is emptied: a provider of an earlier test may have had this port, and its
    keys are not this one's.
    """
    sso_client_forget()
    settings.CERTLABEL_OIDC_ISSUER = provider.issuer
    settings.CERTLABEL_OIDC_CLIENT_ID = "certlabel"
    settings.CERTLABEL_OIDC_CLIENT_SECRET = "client-secret"
    settings.CERTLABEL_OIDC_ROLE_MAP = ROLE_MAP
    settings.CERTLABEL_OIDC_RECHECK_SECONDS = 300.0
    return provider


@pytest.fixture
def study() -> Any:
    return project_create(slug="study", name="Study", manager=UserFactory(username="boss"))


def start(client: Client, next_url: str = "") -> str:
    """GET the SSO login; return the provider's authorization URL it redirects to."""
    response = client.get("/accounts/sso/login/", {"next": next_url} if next_url else {})
    assert response.status_code == 302
    return str(response["Location"])


def sign_in(client: Client, provider: Provider, sub: str, next_url: str = "") -> Any:
    """The whole flow for ``sub``; return the callback's response."""
    return client.get(provider.authorize(start(client, next_url), sub))


def _claims(id_token: str) -> dict[str, Any]:
    payload = id_token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


def test_the_authorization_request_uses_pkce_state_and_nonce(client: Client, sso: Provider):
    url = urlsplit(start(client))
    query = parse_qs(url.query)
    assert f"{url.scheme}://{url.netloc}" == sso.issuer
    assert query["code_challenge_method"] == ["S256"]
    assert len(query["code_challenge"][0]) == 43  # base64url of a SHA-256
    assert query["state"][0] and query["nonce"][0]
    assert query["client_id"] == ["certlabel"]
    assert query["scope"] == ["openid email profile"]
    assert query["redirect_uri"] == ["http://testserver/accounts/sso/callback/"]


def test_first_sign_in_makes_an_account_by_subject_with_roles_from_groups(
    client: Client, sso: Provider, study: Any
):
    sso.user(
        "alice-sub",
        email="alice@example.org",
        email_verified=True,
        preferred_username="alice",
        groups=["study-annotators", "unrelated"],
    )
    response = sign_in(client, sso, "alice-sub", next_url="/p/study/")

    assert response.status_code == 302 and response["Location"] == "/p/study/"
    user = get_user_model().objects.get(username="alice")
    assert user.email == "alice@example.org" and not user.has_usable_password()
    identity = SsoIdentity.objects.get(user=user)
    assert (identity.issuer, identity.subject) == (sso.issuer, "alice-sub")
    assert identity.refresh_token and "alice" not in identity.refresh_token  # kept encrypted
    membership = Membership.objects.get(project=study, user=user)
    assert (membership.role, membership.is_active, membership.from_groups) == (
        Role.ANNOTATOR,
        True,
        True,
    )
    assert client.get("/p/study/").status_code == 200


def test_each_sign_in_applies_the_groups_again(client: Client, sso: Provider, study: Any):
    sso.user("bob-sub", preferred_username="bob", groups=["study-annotators", "study-reviewers"])
    sign_in(client, sso, "bob-sub")
    membership = Membership.objects.get(project=study, user__username="bob")
    assert membership.role == Role.ADJUDICATOR  # the higher of the two roles granted

    sso.user("bob-sub", preferred_username="bob", groups=["study-leads"])
    sign_in(Client(), sso, "bob-sub")
    membership.refresh_from_db()
    assert (membership.role, membership.is_active) == (Role.MANAGER, True)

    sso.user("bob-sub", preferred_username="bob", groups=[])
    sign_in(Client(), sso, "bob-sub")
    membership.refresh_from_db()
    assert (membership.role, membership.is_active) == (Role.MANAGER, False)
    assert get_user_model().objects.filter(username="bob").count() == 1


def test_groups_never_take_away_a_role_a_manager_gave(client: Client, sso: Provider, study: Any):
    sso.user("carol-sub", preferred_username="carol", groups=[])
    sign_in(client, sso, "carol-sub")
    carol = get_user_model().objects.get(username="carol")
    membership_set(project=study, user=carol, role=Role.ADJUDICATOR)

    sign_in(Client(), sso, "carol-sub")

    membership = Membership.objects.get(project=study, user=carol)
    assert (membership.role, membership.is_active, membership.from_groups) == (
        Role.ADJUDICATOR,
        True,
        False,
    )


def test_a_manager_s_change_takes_the_membership_over_from_the_groups(
    client: Client, sso: Provider, study: Any
):
    sso.user("tom-sub", preferred_username="tom", groups=["study-annotators"])
    sign_in(client, sso, "tom-sub")
    tom = get_user_model().objects.get(username="tom")
    boss = get_user_model().objects.get(username="boss")
    membership_deactivate(project=study, actor=boss, user_id=tom.pk)

    sign_in(Client(), sso, "tom-sub")  # still in the group

    membership = Membership.objects.get(project=study, user=tom)
    assert (membership.is_active, membership.from_groups) == (False, False)


def test_leaving_the_groups_gives_back_the_leases(client: Client, sso: Provider, study: Any):
    import_native(study, [work_record("q1")])
    start_labelling(study, overlap=1)
    sso.user("uma-sub", preferred_username="uma", groups=["study-annotators"])
    sign_in(client, sso, "uma-sub")
    uma = get_user_model().objects.get(username="uma")
    assert item_claim_next(project=study, actor=uma) is not None
    assert Assignment.objects.filter(annotator=uma, status="leased").count() == 1

    sso.user("uma-sub", preferred_username="uma", groups=[])
    sign_in(Client(), sso, "uma-sub")

    assert not Membership.objects.get(project=study, user=uma).is_active
    assert not Assignment.objects.filter(annotator=uma, status="leased").exists()


def test_the_last_manager_is_not_taken_out_by_groups(client: Client, sso: Provider, db: None):
    sso.user("lead-sub", preferred_username="lead", groups=["study-leads"])
    project_create(slug="study", name="Study", manager=UserFactory(username="boss"))
    sign_in(client, sso, "lead-sub")
    boss = get_user_model().objects.get(username="boss")
    Membership.objects.filter(user=boss).update(is_active=False)

    sso.user("lead-sub", preferred_username="lead", groups=[])
    sign_in(Client(), sso, "lead-sub")

    lead = Membership.objects.get(user__username="lead")
    assert (lead.role, lead.is_active) == (Role.MANAGER, True)


def test_an_account_is_linked_by_a_verified_address_only(client: Client, sso: Provider):
    local = UserFactory(username="dana", email="dana@example.org")
    sso.user("dana-sub", email="dana@example.org", email_verified=False, preferred_username="dana")
    sign_in(client, sso, "dana-sub")
    identity = SsoIdentity.objects.get(subject="dana-sub")
    assert identity.user != local and identity.user.username == "dana-2"
    assert identity.user.email == ""  # an unverified address is not kept

    sso.user("dana-sub2", email="dana@example.org", email_verified=True)
    sign_in(Client(), sso, "dana-sub2")
    assert SsoIdentity.objects.get(subject="dana-sub2").user == local


def test_a_staff_account_is_never_linked_by_address(client: Client, sso: Provider):
    admin = UserFactory(username="root", email="root@example.org", is_staff=True)
    sso.user("root-sub", email="root@example.org", email_verified=True)
    sign_in(client, sso, "root-sub")
    assert SsoIdentity.objects.get(subject="root-sub").user != admin


def test_a_pending_invitation_to_the_verified_address_is_accepted(
    client: Client, sso: Provider, study: Any
):
    boss = get_user_model().objects.get(username="boss")
    invitation_create(
        project=study,
        actor=boss,
        invitee="erin@example.org",
        role=Role.ADJUDICATOR,
        site="http://testserver",
    )
    sso.user("erin-sub", email="Erin@Example.org", email_verified=True, preferred_username="erin")
    sign_in(client, sso, "erin-sub")

    membership = Membership.objects.get(project=study, user__username="erin")
    assert (membership.role, membership.from_groups) == (Role.ADJUDICATOR, False)
    assert Invitation.objects.get(invitee="erin@example.org").status == "accepted"


def test_an_invitation_is_not_accepted_for_an_unverified_address(
    client: Client, sso: Provider, study: Any
):
    boss = get_user_model().objects.get(username="boss")
    invitation_create(
        project=study, actor=boss, invitee="finn@example.org", role=Role.ANNOTATOR, site="x"
    )
    sso.user("finn-sub", email="finn@example.org", email_verified=False)
    sign_in(client, sso, "finn-sub")
    assert Invitation.objects.get(invitee="finn@example.org").status == "pending"
    assert not Membership.objects.filter(project=study, user__sso_identities__subject="finn-sub")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        # Another audience without an ``azp`` naming us fails the azp rule first.
        ({"aud": "another-client"}, "azp"),
        ({"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}, "expired"),
        ({"nonce": "not-the-nonce-we-sent"}, "nonce"),
        ({"iss": "https://impostor.example.org"}, "iss"),
    ],
)
def test_an_id_token_with_a_wrong_claim_is_refused(
    client: Client, sso: Provider, monkeypatch: pytest.MonkeyPatch, change: dict, reason: str
):
    _serve_id_token(monkeypatch, lambda real: sso.sign({**_claims(real), **change}))
    sso.user("gus-sub", preferred_username="gus")

    response = sign_in(client, sso, "gus-sub")

    assert response.status_code == 400
    assert "Single sign-on failed" in response.content.decode()
    assert reason in response.context["sso_error"]
    assert not SsoIdentity.objects.exists() and "_auth_user_id" not in client.session


def test_a_tampered_id_token_is_refused(
    client: Client, sso: Provider, monkeypatch: pytest.MonkeyPatch
):
    def tamper(real: str) -> str:
        header, _, signature = real.split(".")
        claims = {**_claims(real), "sub": "someone-else"}
        body = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
        return f"{header}.{body}.{signature}"

    _serve_id_token(monkeypatch, tamper)
    sso.user("hal-sub")
    response = sign_in(client, sso, "hal-sub")
    assert response.status_code == 400 and not SsoIdentity.objects.exists()


def test_a_token_the_provider_signed_itself_passes_the_same_checks(
    client: Client, sso: Provider, monkeypatch: pytest.MonkeyPatch
):
    # The control of the refusals above: re-signing the unchanged claims is accepted.
    _serve_id_token(monkeypatch, lambda real: sso.sign(_claims(real)))
    sso.user("ida-sub", preferred_username="ida")
    assert sign_in(client, sso, "ida-sub").status_code == 302
    assert SsoIdentity.objects.get(subject="ida-sub").user.username == "ida"


def _serve_id_token(monkeypatch: pytest.MonkeyPatch, make: Any) -> None:
    """Make the code exchange answer the provider's tokens with ``make(real_id_token)``."""
    client = sso_client()
    real = client.fetch_access_token

    def exchange(**kwargs: Any) -> Any:
        token = real(**kwargs)
        token["id_token"] = make(token["id_token"])
        return token

    monkeypatch.setattr(client, "fetch_access_token", exchange)


def test_a_wrong_state_is_refused(client: Client, sso: Provider):
    sso.user("jo-sub")
    callback = sso.authorize(start(client), "jo-sub")
    forged = callback.replace("state=", "state=x")
    response = client.get(forged)
    assert response.status_code == 400 and not SsoIdentity.objects.exists()


def test_a_code_is_used_once(client: Client, sso: Provider):
    sso.user("kim-sub")
    callback = sso.authorize(start(client), "kim-sub")
    assert client.get(callback).status_code == 302
    replay = Client()
    assert replay.get(callback).status_code == 400
    assert "_auth_user_id" not in replay.session


def test_a_denied_sign_in_says_so(client: Client, sso: Provider):
    import requests

    answer = requests.post(start(client), data={"action": "deny"}, allow_redirects=False)
    callback = urlsplit(answer.headers["Location"])
    response = client.get(f"{callback.path}?{callback.query}")
    assert response.status_code == 400 and "denied" in response.context["sso_error"]


def test_deactivation_at_the_provider_ends_sessions_and_suspends_api_tokens(
    client: Client, sso: Provider, settings: Any
):
    sso.user("liv-sub", preferred_username="liv")
    sign_in(client, sso, "liv-sub")
    other_browser = Client()
    sign_in(other_browser, sso, "liv-sub")
    liv = get_user_model().objects.get(username="liv")
    secret = api_token_create(user=liv, name="ci").secret
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    assert api.get("/api/account/tokens/").status_code == 200

    settings.CERTLABEL_OIDC_RECHECK_SECONDS = 0.0
    assert client.get("/").status_code == 200  # the provider still vouches for her

    sso.revoke("liv-sub")
    response = client.get("/")

    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert other_browser.get("/").status_code == 302  # every SSO session of hers ends
    refused = api.get("/api/account/tokens/")
    assert refused.status_code == 401 and refused.json()["code"] == "token_suspended"
    liv.refresh_from_db()
    assert liv.is_active  # the administrators' switch is not the provider's
    token = ApiToken.objects.get(user=liv)
    assert token.revoked_at is None  # suspended, not revoked: nothing is lost for good

    # Allowed again at the provider: the next sign-in lifts the suspension.
    assert sign_in(Client(), sso, "liv-sub").status_code == 302
    assert api.get("/api/account/tokens/").status_code == 200
    assert SsoIdentity.objects.get(user=liv).lapsed_at is None


def test_an_account_deactivated_here_stays_out_whatever_the_provider_says(
    client: Client, sso: Provider
):
    sso.user("wes-sub", preferred_username="wes")
    sign_in(client, sso, "wes-sub")
    get_user_model().objects.filter(username="wes").update(is_active=False)
    sso.revoke("wes-sub")

    response = sign_in(Client(), sso, "wes-sub")

    assert response.status_code == 403
    assert not get_user_model().objects.get(username="wes").is_active


def test_a_refresh_token_no_key_reads_lapses_the_identity(sso: Provider, settings: Any):
    sso.user("xan-sub", preferred_username="xan")
    sign_in(Client(), sso, "xan-sub")
    settings.CERTLABEL_OIDC_RECHECK_SECONDS = 0.0
    settings.SECRET_KEY = "another-secret-key-" + "x" * 40  # rotated without a fallback

    assert sso_recheck_due() == {"lapsed": 1}
    assert SsoIdentity.objects.get().lapsed_at is not None


def test_without_a_refresh_token_the_session_lasts_as_the_id_token(settings: Any, db: None):
    sso_client_forget()
    with provider_running(issue_refresh_token=False) as provider:
        settings.CERTLABEL_OIDC_ISSUER = provider.issuer
        settings.CERTLABEL_OIDC_CLIENT_ID = "certlabel"
        settings.CERTLABEL_OIDC_CLIENT_SECRET = "client-secret"
        settings.CERTLABEL_OIDC_RECHECK_SECONDS = 0.0
        provider.user("yan-sub", preferred_username="yan")
        client = Client()
        sign_in(client, provider, "yan-sub")
        assert SsoIdentity.objects.get().refresh_token == ""
        assert client.get("/").status_code == 200  # the ID token has an hour to go

        session = client.session
        session["sso"] = {**session["sso"], "expires_at": time.time() - 1}
        session.save()
        assert client.get("/").status_code == 302


def test_an_identity_of_another_provider_is_not_asked_here(sso: Provider, settings: Any):
    sso.user("vic-sub", preferred_username="vic")
    sign_in(Client(), sso, "vic-sub")
    settings.CERTLABEL_OIDC_RECHECK_SECONDS = 0.0
    assert sso_recheck_due() == {"active": 1}
    SsoIdentity.objects.update(issuer="https://old-provider.example.org")
    assert sso_recheck_due() == {}  # its refresh token is never sent to the new provider
    assert get_user_model().objects.get(username="vic").is_active


def test_the_periodic_recheck_covers_accounts_that_only_use_tokens(sso: Provider, settings: Any):
    sso.user("max-sub", preferred_username="max")
    sso.user("ned-sub", preferred_username="ned")
    sign_in(Client(), sso, "max-sub")
    sign_in(Client(), sso, "ned-sub")
    settings.CERTLABEL_OIDC_RECHECK_SECONDS = 0.0
    sso.revoke("ned-sub")

    assert sso_recheck_due() == {"active": 1, "lapsed": 1}
    assert SsoIdentity.objects.get(subject="max-sub").lapsed_at is None
    assert SsoIdentity.objects.get(subject="ned-sub").lapsed_at is not None
    assert sso_recheck_due() == {"active": 1}  # a lapsed identity is not asked again


def test_an_unreachable_provider_changes_nothing(client: Client, sso: Provider, settings: Any):
    sso.user("ola-sub", preferred_username="ola")
    sign_in(client, sso, "ola-sub")
    settings.CERTLABEL_OIDC_RECHECK_SECONDS = 0.0
    client_ = sso_client()
    client_.server_metadata["token_endpoint"] = "http://127.0.0.1:9/token"
    try:
        assert client.get("/").status_code == 200
        assert sso_recheck_due() == {"unknown": 1}
    finally:
        client_.server_metadata["token_endpoint"] = f"{sso.issuer}/oauth2/token"
    assert get_user_model().objects.get(username="ola").is_active


def test_an_account_deactivated_here_is_refused(client: Client, sso: Provider):
    sso.user("pat-sub", preferred_username="pat")
    sign_in(client, sso, "pat-sub")
    get_user_model().objects.filter(username="pat").update(is_active=False)

    response = sign_in(Client(), sso, "pat-sub")

    assert response.status_code == 403
    assert "deactivated here" in response.context["sso_error"]


def test_logout_ends_the_provider_session_too(client: Client, sso: Provider):
    sso.user("quinn-sub")
    sign_in(client, sso, "quinn-sub")
    id_token = client.session["sso"]["id_token"]

    response = client.post("/accounts/logout/")

    assert "_auth_user_id" not in client.session
    url = urlsplit(response["Location"])
    query = parse_qs(url.query)
    assert f"{url.scheme}://{url.netloc}{url.path}" == f"{sso.issuer}/oauth2/end_session"
    assert query["id_token_hint"] == [id_token]
    assert query["post_logout_redirect_uri"] == ["http://testserver/accounts/login/"]


def test_a_local_logout_stays_local(client: Client, sso: Provider):
    client.force_login(UserFactory())
    response = client.post("/accounts/logout/")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/"


def test_the_login_page_offers_both_ways(client: Client, sso: Provider, settings: Any):
    settings.CERTLABEL_OIDC_NAME = "Acme SSO"
    page = client.get("/accounts/login/?next=/p/study/").content.decode()
    assert "Sign in with Acme SSO" in page and 'name="password"' in page
    assert "/accounts/sso/login/?next=/p/study/" in page


def test_without_sso_nothing_changes(client: Client, settings: Any, db: None):
    page = client.get("/accounts/login/").content.decode()
    assert "Sign in with" not in page and 'name="password"' in page
    assert client.get("/accounts/sso/login/").status_code == 404
    assert client.get("/accounts/sso/callback/?code=x&state=y").status_code == 404


def test_switching_local_passwords_off(client: Client, sso: Provider, settings: Any, db: None):
    UserFactory(username="local", password="a-long-password-1")
    settings.CERTLABEL_PASSWORD_LOGIN = False

    page = client.get("/accounts/login/").content.decode()
    assert 'name="password"' not in page and "Sign in with" in page
    refused = client.post(
        "/accounts/login/", {"username": "local", "password": "a-long-password-1"}
    )
    assert refused.status_code == 200 and "_auth_user_id" not in client.session
    token = APIClient().post(
        "/api/auth/token/",
        {"username": "local", "password": "a-long-password-1"},
        format="json",
    )
    assert token.status_code == 403 and token.json()["code"] == "password_login_disabled"

    sso.user("rae-sub", preferred_username="rae")
    assert sign_in(client, sso, "rae-sub").status_code == 302


def test_a_malformed_role_map_names_the_entry(settings: Any):
    settings.CERTLABEL_OIDC_ROLE_MAP = "team-a=study:annotator, team-b=study:boss"
    with pytest.raises(ImproperlyConfigured, match="'team-b=study:boss'"):
        role_map()
    settings.CERTLABEL_OIDC_ROLE_MAP = "study:annotator"
    with pytest.raises(ImproperlyConfigured, match="GROUP=PROJECT_SLUG:ROLE"):
        role_map()


def test_the_role_map_takes_group_names_with_commas_as_json(settings: Any):
    settings.CERTLABEL_OIDC_ROLE_MAP = json.dumps(
        {
            "CN=eval,OU=groups,DC=acme": ["study:annotator", "other:manager"],
            "leads": "study:manager",
        }
    )
    assert [(g.group, g.project, g.role) for g in role_map()] == [
        ("CN=eval,OU=groups,DC=acme", "study", "annotator"),
        ("CN=eval,OU=groups,DC=acme", "other", "manager"),
        ("leads", "study", "manager"),
    ]


def test_an_unreachable_provider_at_sign_in_is_a_503(client: Client, settings: Any, db: None):
    settings.CERTLABEL_OIDC_ISSUER = "http://127.0.0.1:9"
    settings.CERTLABEL_OIDC_CLIENT_ID = "certlabel"
    settings.CERTLABEL_OIDC_TIMEOUT = 2.0
    response = client.get("/accounts/sso/login/")
    assert response.status_code == 503 and "cannot be reached" in response.content.decode()


def test_forms_may_end_at_the_provider_only_with_sso(client: Client, settings: Any, db: None):
    def form_action() -> str:
        policy = client.get("/accounts/login/")["Content-Security-Policy"]
        return next(d for d in policy.split("; ") if d.startswith("form-action"))

    assert form_action() == "form-action 'self'"
    settings.CERTLABEL_OIDC_ISSUER = "https://login.example.org/realms/eval"
    settings.CERTLABEL_OIDC_CLIENT_ID = "certlabel"
    assert form_action() == "form-action 'self' https://login.example.org"


def test_a_hanging_provider_is_given_up_after_the_timeout(client: Client, settings: Any, db: None):
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepts connections, never answers
    try:
        settings.CERTLABEL_OIDC_ISSUER = f"http://127.0.0.1:{listener.getsockname()[1]}"
        settings.CERTLABEL_OIDC_CLIENT_ID = "certlabel"
        settings.CERTLABEL_OIDC_TIMEOUT = 1.0
        started = time.monotonic()
        response = client.get("/accounts/sso/login/")
        assert response.status_code == 503
        assert time.monotonic() - started < 10
    finally:
        listener.close()


def test_a_provider_error_shows_no_text_of_the_sender(client: Client, sso: Provider):
    response = client.get(
        "/accounts/sso/callback/",
        {"error": "invalid_request", "error_description": "Your account is locked. Call us"},
    )
    assert response.status_code == 400
    assert "Call us" not in response.content.decode()
    assert response.context["sso_error"] == (
        "single sign-on failed: the identity provider refused the sign-in"
    )


@pytest.mark.parametrize(
    "claims",
    [{"sub": "s" * 256}, {"sub": "nul\x00sub"}],
    ids=["subject over 255 characters", "subject with a NUL"],
)
def test_an_unusable_subject_is_refused(claims: dict, settings: Any, db: None):
    from labeling.exceptions import PermissionDenied
    from labeling.services.sso import sso_sign_in

    with pytest.raises(PermissionDenied, match="not usable"):
        sso_sign_in(claims={"iss": "https://idp.example.org", **claims})
    assert not SsoIdentity.objects.exists()


@pytest.mark.parametrize(
    "email", ["x" * 250 + "@example.org", "nul\x00@example.org", "not an address", ["a@b.org"]]
)
def test_an_unusable_address_is_not_kept(email: Any, db: None):
    from labeling.services.sso import sso_sign_in

    signed_in = sso_sign_in(
        claims={
            "iss": "https://idp.example.org",
            "sub": "abc",
            "email": email,
            "email_verified": True,
        }
    )
    assert signed_in.user.email == ""


def test_look_alike_usernames_are_normalised(db: None):
    from labeling.services.sso import sso_sign_in

    signed_in = sso_sign_in(
        claims={"iss": "https://idp.example.org", "sub": "fw", "preferred_username": "ａｄｍｉｎ"}
    )
    assert signed_in.user.username == "admin"


def test_a_hand_given_role_survives_linking_and_groups(client: Client, sso: Provider, study: Any):
    zoe = UserFactory(username="zoe", email="zoe@example.org")
    membership_set(project=study, user=zoe, role=Role.ADJUDICATOR)
    sso.user("zoe-sub", email="zoe@example.org", email_verified=True, groups=["study-annotators"])
    sign_in(client, sso, "zoe-sub")
    sso.user("zoe-sub", email="zoe@example.org", email_verified=True, groups=[])
    sign_in(Client(), sso, "zoe-sub")

    membership = Membership.objects.get(project=study, user=zoe)
    assert (membership.role, membership.is_active, membership.from_groups) == (
        Role.ADJUDICATOR,
        True,
        False,
    )


def test_no_password_reset_while_passwords_are_off(client: Client, settings: Any, mailoutbox):
    UserFactory(username="pam", email="pam@example.org")
    settings.CERTLABEL_PASSWORD_LOGIN = False
    response = client.post("/accounts/password_reset/", {"email": "pam@example.org"})
    assert response.status_code == 403 and mailoutbox == []


def test_leaving_a_group_takes_the_role_away_at_the_next_check(
    client: Client, sso: Provider, study: Any, settings: Any
):
    sso.user("ada-sub", preferred_username="ada", groups=["study-leads"])
    sign_in(client, sso, "ada-sub")
    settings.CERTLABEL_OIDC_RECHECK_SECONDS = 0.0
    sso.user("ada-sub", preferred_username="ada", groups=[])

    assert client.get("/").status_code == 200  # the provider still vouches for her

    membership = Membership.objects.get(project=study, user__username="ada")
    assert (membership.role, membership.is_active) == (Role.MANAGER, False)
    assert client.get("/p/study/").status_code == 404


def test_a_sign_in_after_a_lapse_does_not_revive_older_sessions(
    sso: Provider, settings: Any, db: None
):
    sso.user("bea-sub", preferred_username="bea")
    laptop, phone = Client(), Client()
    sign_in(laptop, sso, "bea-sub")
    sign_in(phone, sso, "bea-sub")
    settings.CERTLABEL_OIDC_RECHECK_SECONDS = 0.0
    sso.revoke("bea-sub")
    assert phone.get("/").status_code == 302  # the phone's check lapses the identity

    assert sign_in(Client(), sso, "bea-sub").status_code == 302  # she signs in anew

    assert laptop.post("/account/", {"name": "x", "expires_in_days": 30}).status_code == 302
    assert "_auth_user_id" not in laptop.session  # the laptop's session ended, writes included


def test_a_lapse_at_a_former_provider_does_not_hold_tokens_back(sso: Provider, settings: Any):
    sso.user("cy-sub", preferred_username="cy")
    sign_in(Client(), sso, "cy-sub")
    cy = get_user_model().objects.get(username="cy")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=cy, name='ci').secret}")
    SsoIdentity.objects.update(lapsed_at="2026-01-01T00:00:00Z")
    assert api.get("/api/account/tokens/").json()["code"] == "token_suspended"

    SsoIdentity.objects.update(issuer="https://former-provider.example.org")
    assert api.get("/api/account/tokens/").status_code == 200
    settings.CERTLABEL_OIDC_ISSUER = ""
    assert api.get("/api/account/tokens/").status_code == 200


def test_a_check_stores_the_refresh_token_under_the_current_key(sso: Provider, settings: Any):
    sso.user("dov-sub", preferred_username="dov")
    sign_in(Client(), sso, "dov-sub")
    settings.CERTLABEL_OIDC_RECHECK_SECONDS = 0.0
    old_key = settings.SECRET_KEY
    settings.SECRET_KEY = "a-brand-new-secret-key-" + "y" * 40
    settings.SECRET_KEY_FALLBACKS = [old_key]
    assert sso_recheck_due() == {"active": 1}

    settings.SECRET_KEY_FALLBACKS = []  # the end of Django's rotation
    SsoIdentity.objects.update(checked_at="2000-01-01T00:00:00Z")
    assert sso_recheck_due() == {"active": 1}


def test_an_unreachable_provider_is_asked_again_within_a_minute(sso: Provider, settings: Any):
    sso.user("eve-sub", preferred_username="eve")
    sign_in(Client(), sso, "eve-sub")
    settings.CERTLABEL_OIDC_RECHECK_SECONDS = 300.0
    SsoIdentity.objects.update(checked_at="2000-01-01T00:00:00Z")
    client_ = sso_client()
    client_.server_metadata["token_endpoint"] = "http://127.0.0.1:9/token"
    try:
        assert sso_recheck_due() == {"unknown": 1}
    finally:
        client_.server_metadata["token_endpoint"] = f"{sso.issuer}/oauth2/token"
    checked = SsoIdentity.objects.get().checked_at
    wait = checked + timedelta(seconds=300) - timezone.now()
    assert timedelta(seconds=55) < wait <= timedelta(seconds=60)


def test_a_json_role_map_may_not_give_a_group_twice(settings: Any):
    settings.CERTLABEL_OIDC_ROLE_MAP = '{"leads": "study:manager", "leads": "study:annotator"}'
    with pytest.raises(ImproperlyConfigured, match="'leads' is given twice"):
        role_map()


def test_a_provider_error_code_is_logged_as_a_code(
    client: Client, sso: Provider, caplog: pytest.LogCaptureFixture
):
    forged = "access_denied\n2026-12-07 INFO labeling.services.sso sso.signed_in user=1"
    client.get("/accounts/sso/callback/", {"error": forged})
    logged = [r.getMessage() for r in caplog.records if "refused_by_provider" in r.getMessage()]
    assert len(logged) == 1 and "\n" not in logged[0]
    assert logged[0].startswith("sso.refused_by_provider error=access_denied")
