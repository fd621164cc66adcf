"""A real OpenID Connect provider for the single sign-on tests, served on a free port.

The provider is ``oidc-provider-mock`` (an Authlib server: discovery, JWKS, authorization code,
token with refresh tokens, userinfo, RP-initiated logout). Its sign-in page asks for a subject;
``user(sub, **claims)`` sets the claims its tokens carry (e-mail, groups…), ``revoke(sub)``
withdraws every token of a subject (a person deactivated at the provider), and ``sign(claims)``
signs an ID token with the provider's own key, for the refusal tests.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import flask
import oidc_provider_mock
import requests
import werkzeug.serving
from joserfc import jwt
from joserfc.jwk import RSAKey


class Provider:
    """A running provider: its ``issuer`` URL and the calls that change what it says."""

    def __init__(self, app: flask.Flask, port: int) -> None:
        self.issuer = f"http://localhost:{port}"
        with app.test_request_context():
            app.preprocess_request()  # the provider keeps its state on flask.g
            storage = flask.g.oidc_provider_mock_storage
        self._key = RSAKey.import_key(storage.jwk.as_dict(is_private=True))

    def user(self, sub: str, **claims: Any) -> None:
        """Set the claims of ``sub`` (the next tokens carry them)."""
        requests.put(f"{self.issuer}/users/{sub}", json=claims, timeout=10).raise_for_status()

    def revoke(self, sub: str) -> None:
        """Withdraw every access and refresh token of ``sub`` (deactivated at the provider)."""
        requests.post(f"{self.issuer}/users/{sub}/revoke-tokens", timeout=10).raise_for_status()

    def sign(self, claims: dict[str, Any]) -> str:
        """An ID token of ``claims`` signed with the provider's key (its JWKS verifies it)."""
        header = {"alg": "RS256", "kid": self._key.kid}
        return jwt.encode(header, claims, self._key)

    def authorize(self, url: str, sub: str) -> str:
        """Sign ``sub`` in on the provider's page at ``url``; return the callback's path+query."""
        answer = requests.post(url, data={"sub": sub}, allow_redirects=False, timeout=10)
        assert answer.status_code == 302, answer.text[:500]
        callback = urlsplit(answer.headers["Location"])
        return f"{callback.path}?{callback.query}"


@contextmanager
def provider_running(**options: Any) -> Iterator[Provider]:
    """Serve a fresh provider on a free localhost port for the duration of the block.

    ``options`` go to ``oidc_provider_mock.app`` (e.g. ``issue_refresh_token=False``).
    """
    app = oidc_provider_mock.app(**options)
    server = werkzeug.serving.make_server("localhost", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield Provider(app, server.server_port)
    finally:
        server.shutdown()
        thread.join()
