"""The API's token endpoint: a username and password in, the user's API token out.

Guessing passwords here is bounded twice: the ``token`` throttle scope (``CERTLABEL_THROTTLE_
TOKEN`` requests per client address; 429 with ``Retry-After`` beyond it) and the login lockout
of django-axes, shared with the login page (``CERTLABEL_LOGIN_FAILURE_LIMIT`` wrong passwords
lock the username from that address; 429 too, even with the right password).
"""

from __future__ import annotations

from typing import Any

from axes.helpers import get_lockout_message
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.authtoken.models import Token
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.exceptions import Throttled, ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from labeling.api.common import ErrorSerializer
from labeling.api.parsers import StrictFormParser, StrictJSONParser


class TokenObtainApi(APIView):
    """``POST /api/auth/token/``: the API token of the user whose credentials are posted."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    parser_classes = [StrictJSONParser, StrictFormParser]
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "token"

    @extend_schema(
        operation_id="auth_token_obtain",
        request=AuthTokenSerializer,
        responses={
            200: inline_serializer("TokenOut", {"token": serializers.CharField()}),
            400: OpenApiResponse(ErrorSerializer, description="wrong username or password"),
            429: OpenApiResponse(
                ErrorSerializer, description="too many requests, or the login is locked out"
            ),
        },
    )
    def post(self, request: Request) -> Response:
        serializer = AuthTokenSerializer(data=request.data, context={"request": request})
        try:
            serializer.is_valid(raise_exception=True)
        except ValidationError:
            # axes marks the request when this failure reached the limit or the username was
            # already locked out from this address.
            if getattr(request, "axes_locked_out", False):
                raise Throttled(detail=str(get_lockout_message())) from None
            raise
        token, _ = Token.objects.get_or_create(user=serializer.validated_data["user"])
        return Response({"token": token.key})
