"""In the browser: single sign-on through a real OpenID Connect provider process, end to end.

A person signs in with the login page's button on the provider's own page, lands in the project
their group grants, sees their role there; a refused sign-in shows why; logging out passes
through the provider's end-session page back to the login page; a person deactivated at the
provider loses their session at the next page load and their API token with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from labeling.models import Membership, Role
from labeling.services import project_create
from labeling.services.sso import sso_client_forget
from labeling.services.tokens import api_token_create
from tests.browser.test_account_browser import api_status
from tests.factories import UserFactory
from tests.sso_provider import Provider, provider_process

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def sso(settings: Any) -> Iterator[Provider]:
    sso_client_forget()  # a provider of an earlier test may have had this port
    with provider_process() as provider:
        settings.CERTLABEL_OIDC_ISSUER = provider.issuer
        settings.CERTLABEL_OIDC_CLIENT_ID = "certlabel"
        settings.CERTLABEL_OIDC_CLIENT_SECRET = "client-secret"
        settings.CERTLABEL_OIDC_NAME = "Acme ID"
        settings.CERTLABEL_OIDC_ROLE_MAP = "eval-a-annotators=study:annotator"
        yield provider


def sign_in_with_the_button(page: Any, base: str, sub: str) -> None:
    page.goto(f"{base}/accounts/login/?next=/p/study/")
    page.click("#sso-login")
    page.wait_for_url(lambda url: "/oauth2/authorize" in url)
    page.fill("input[name=sub]", sub)
    page.click("button:has-text('Authorize')")


def test_single_sign_on_in_the_browser(
    live_server: Any, sso: Provider, settings: Any, new_page: Callable, screenshot: Callable
):
    project_create(slug="study", name="Study", manager=UserFactory(username="boss"))
    sso.user(
        "ann-sub",
        email="ann@example.org",
        email_verified=True,
        preferred_username="ann",
        groups=["eval-a-annotators"],
    )
    base = live_server.url
    page = new_page()

    # First sign-in: an account made by subject, its role from the group.
    page.goto(f"{base}/accounts/login/")
    assert page.inner_text("#sso-login") == "Sign in with Acme ID"
    screenshot(page, "login")
    sign_in_with_the_button(page, base, "ann-sub")
    page.wait_for_url(f"{base}/p/study/")
    screenshot(page, "signed-in")
    assert page.inner_text("#nav-account") == "ann"
    ann = get_user_model().objects.get(username="ann")
    assert Membership.objects.get(user=ann).role == Role.ANNOTATOR

    # Logout passes through the provider's end-session page, then back to the login page.
    page.click("form[action='/accounts/logout/'] button")
    page.wait_for_url(lambda url: "/oauth2/end_session" in url)
    screenshot(page, "provider-end-session")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: url.startswith(f"{base}/accounts/login/"))
    assert page.goto(f"{base}/p/study/").url.startswith(f"{base}/accounts/login/")

    # A refused sign-in (the person denies it at the provider) says why, on the login page.
    page.goto(f"{base}/accounts/login/")
    page.click("#sso-login")
    page.wait_for_url(lambda url: "/oauth2/authorize" in url)
    page.click("button:has-text('Deny')")
    page.wait_for_selector("#sso-error")
    assert "denied" in page.inner_text("#sso-error")
    screenshot(page, "refused")

    # An answer to a sign-in this browser did not start (a forged state) is refused.
    page.goto(f"{base}/accounts/sso/login/")  # a sign-in starts: its state is in the session
    page.wait_for_url(lambda url: "/oauth2/authorize" in url)
    page.goto(f"{base}/accounts/sso/callback/?code=stolen-code&state=forged-state")
    assert "state" in page.inner_text("#sso-error").lower()
    assert page.goto(f"{base}/p/study/").url.startswith(f"{base}/accounts/login/")

    # Signed in again, with an API token; then deactivated at the provider.
    sign_in_with_the_button(page, base, "ann-sub")
    page.wait_for_url(f"{base}/p/study/")
    secret = api_token_create(user=ann, name="script").secret
    assert api_status(base, secret)[0] == 200
    sso.revoke("ann-sub")
    settings.CERTLABEL_OIDC_RECHECK_SECONDS = 0.0
    page.goto(f"{base}/p/study/")
    page.wait_for_url(lambda url: url.startswith(f"{base}/accounts/login/"))
    screenshot(page, "deactivated")
    status, body = api_status(base, secret)
    assert (status, body["code"]) == (401, "token_suspended")
    assert page.js_errors == [] and page.csp_violations == []
