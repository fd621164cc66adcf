"""A real OpenID Connect provider for the single sign-on tests, served on a free port.

The provider is ``oidc-provider-mock`` (an Authlib server: discovery, JWKS, authorization code,
token with refresh tokens, userinfo, RP-initiated logout), run in a thread of the test process
(:func:`provider_running`, whose key can sign tokens for the refusal tests) or as a process of
its own (:func:`provider_process`, for the browser tests). Its sign-in page asks for a subject;
``user(sub, **claims)`` sets the claims its tokens carry (e-mail, groups…), ``revoke(sub)``
withdraws every token of a subject (a person deactivated at the provider), and ``sign(claims)``
signs an ID token with the provider's own key, for the refusal tests.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
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

    def __init__(self, port: int, app: flask.Flask | None = None) -> None:
        self.issuer = f"http://localhost:{port}"
        self._key = None
        if app is not None:
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
        assert self._key is not None, "only a provider run in this process lends its key"
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
        yield Provider(server.server_port, app)
    finally:
        server.shutdown()
        thread.join()


@contextmanager
def provider_process() -> Iterator[Provider]:
    """Run the provider as a process of its own on a free port; stop it when the block ends."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "oidc_provider_mock",
            "--port",
            str(port),
            "--require-nonce",
            "true",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        provider = Provider(port)
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(f"{provider.issuer}/.well-known/openid-configuration", timeout=2)
                break
            except requests.RequestException:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the OpenID Connect provider did not start") from None
                time.sleep(0.2)
        yield provider
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
