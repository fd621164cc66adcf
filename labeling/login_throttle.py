"""Login throttling: the django-axes backend, as the site's web logins use it.

django-axes counts failed logins per username and client address and refuses a locked-out
login before its password is checked (settings ``AXES_*``). Its backend requires the request;
the login page, the admin's login and the token endpoint always pass one. A call without a
request is not a web login (Django's test client ``login()``, a shell) and is passed on to the
next backend unchecked, instead of failing as the stock backend does. The handler
(``AXES_HANDLER``) adds a lockout per address across usernames. With
``CERTLABEL_PASSWORD_LOGIN`` false (single sign-on only) every password is refused here.
"""

from __future__ import annotations

from typing import Any

from axes.attempts import get_cool_off_threshold
from axes.backends import AxesStandaloneBackend
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_failure_limit
from axes.models import AccessAttempt
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db.models import Sum
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

        Raises:
            AxesBackendPermissionDenied: the username is locked out from this address.
            PermissionDenied: local passwords are switched off (``CERTLABEL_PASSWORD_LOGIN``);
                Django's ``authenticate`` then tries no further backend.
        """
        if password is not None and not settings.CERTLABEL_PASSWORD_LOGIN:
            raise PermissionDenied("local passwords are switched off")
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)


class LoginAttemptHandler(AxesDatabaseHandler):
    """axes' database handler that also locks out an address failing for many usernames.

    axes counts failures per username and address (``AXES_LOCKOUT_PARAMETERS``), so one wrong
    password for each of many accounts from one address (password spraying) is never slowed.
    Here an address is also locked out once the failures of every username from it, within
    ``AXES_COOLOFF_TIME``, reach ``CERTLABEL_LOGIN_ADDRESS_FAILURE_LIMIT`` (a limit of its own,
    larger than the per-account one, so that colleagues behind one address do not lock each
    other out by a few typos). Counted in the database: every process sees the same count.
    """

    def get_failures(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> int:
        """Return the username's failures from this address, or at least the lockout limit.

        The limit once the address is over its own limit, so that axes locks the login out and
        answers as it does for one account.
        """
        failures = super().get_failures(request, credentials)
        attempts = AccessAttempt.objects.filter(ip_address=request.axes_ip_address)  # type: ignore[attr-defined]
        if settings.AXES_COOLOFF_TIME is not None:
            attempts = attempts.filter(attempt_time__gte=get_cool_off_threshold(request))
        address = attempts.aggregate(n=Sum("failures_since_start"))["n"] or 0
        if address >= settings.CERTLABEL_LOGIN_ADDRESS_FAILURE_LIMIT:
            return max(failures, get_failure_limit(request, credentials))
        return failures
