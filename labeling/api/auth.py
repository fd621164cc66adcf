"""The API's token endpoint: a username and password in, a new named, expiring API token out.

Each call makes a new token (``name`` defaults to "API token", ``expires_in_days`` to 30; see
``labeling/services/tokens.py``); the signed-in user lists and revokes their tokens on the My
account page or at ``/api/account/tokens/``.

Guessing passwords here is bounded twice: the ``token`` throttle scope (``CERTLABEL_THROTTLE_
TOKEN`` requests per client address; 429 with ``Retry-After`` beyond it) and the login lockout
of django-axes, shared with the login page (``CERTLABEL_LOGIN_FAILURE_LIMIT`` wrong passwords
lock the username from that address; 429 too, even with the right password).
"""

from __future__ import annotations

from typing import Any

from axes.helpers import get_lockout_message
from django.conf import settings
from django.core.cache import caches
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.exceptions import Throttled, ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from labeling.api.account import ApiTokenCreatedSerializer, created_token_body
from labeling.api.common import ErrorSerializer, written
from labeling.api.fields import StrictCharField
from labeling.exceptions import ErrorCode, PermissionDenied
from labeling.services.tokens import (
    TOKEN_DEFAULT_DAYS,
    TOKEN_MAX_DAYS,
    TOKEN_NAME_MAX,
    api_token_create,
)

DEFAULT_TOKEN_NAME = "API token"  # noqa: S105 (a label, not a secret)


class SharedScopedRateThrottle(ScopedRateThrottle):
    """DRF's scoped throttle counted in the ``shared`` cache, which every process sees.

    The default cache may be per process (``locmemcache://``): with four web processes a
    10/minute budget would be 40/minute. ``shared`` is Redis when configured, else the database.
    """

    cache = caches["shared"]


class TokenObtainSerializer(AuthTokenSerializer):
    """Credentials, and the new token's name and lifetime."""

    name = StrictCharField(max_length=TOKEN_NAME_MAX, default=DEFAULT_TOKEN_NAME)
    expires_in_days = serializers.IntegerField(
        min_value=1, max_value=TOKEN_MAX_DAYS, default=TOKEN_DEFAULT_DAYS
    )

    class Meta:
        ref_name = "TokenObtainInput"


class TokenObtainApi(APIView):
    """``POST /api/auth/token/``: a new API token of the user whose credentials are posted."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    throttle_classes = [SharedScopedRateThrottle]
    throttle_scope = "token"

    @extend_schema(
        operation_id="auth_token_obtain",
        request=TokenObtainSerializer,
        responses={
            200: ApiTokenCreatedSerializer,
            400: OpenApiResponse(ErrorSerializer, description="wrong username or password"),
            429: OpenApiResponse(
                ErrorSerializer, description="too many requests, or the login is locked out"
            ),
        },
    )
    def post(self, request: Request) -> Response:
        if not settings.CERTLABEL_PASSWORD_LOGIN:
            raise PermissionDenied(
                "local passwords are switched off: sign in through single sign-on and make a "
                "token on the My account page",
                code=ErrorCode.PASSWORD_LOGIN_DISABLED,
            )
        serializer = TokenObtainSerializer(data=request.data, context={"request": request})
        try:
            serializer.is_valid(raise_exception=True)
        except ValidationError:
            # axes marks the request when this failure reached the limit or the username was
            # already locked out from this address.
            if getattr(request, "axes_locked_out", False):
                raise Throttled(detail=str(get_lockout_message())) from None
            raise
        given = serializer.validated_data
        body = written(
            lambda: api_token_create(
                user=given["user"], name=given["name"], expires_in_days=given["expires_in_days"]
            ),
            created_token_body,
        )
        return Response(body)
