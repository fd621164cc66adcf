"""Login throttling: the django-axes backend, as the site's web logins use it.

django-axes counts failed logins per username and client address and refuses a locked-out
login before its password is checked (settings ``AXES_*``). Its backend requires the request;
the login page, the admin's login and the token endpoint always pass one. A call without a
request is not a web login (Django's test client ``login()``, a shell) and is passed on to the
next backend unchecked, instead of failing as the stock backend does.
"""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from django.http import HttpRequest


class LoginThrottleBackend(AxesStandaloneBackend):
    """``AxesStandaloneBackend`` that lets a call without a request through to the next backend."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Refuse a locked-out web login; pass every other call on.

        Args:
            request: the login's request, or None outside a web request.
            username: the username given.
            password: the password given.
            **kwargs: further credentials, passed on to axes.

        Raises:
            AxesBackendPermissionDenied: the username is locked out from this address.
        """
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)
