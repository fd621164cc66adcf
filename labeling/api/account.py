"""REST API of the signed-in user's own account: their API tokens.

``GET /api/account/tokens/`` lists them (newest first; the secret is never shown again),
``POST`` makes one (``name``, ``expires_in_days``; the answer carries the secret, once),
``DELETE /api/account/tokens/<id>/`` revokes one. Each user sees and revokes their own only.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling.api.common import ErrorSerializer, paginated, request_actor, written
from labeling.api.fields import StrictCharField
from labeling.api.pagination import CappedLimitOffsetPagination
from labeling.models import ApiToken
from labeling.selectors.tokens import api_token_list, api_token_state
from labeling.services.tokens import (
    TOKEN_DEFAULT_DAYS,
    TOKEN_MAX_DAYS,
    TOKEN_NAME_MAX,
    CreatedToken,
    api_token_create,
    api_token_revoke,
)


class ApiTokenSerializer(serializers.Serializer):
    """One API token as its owner sees it (never the secret)."""

    id = serializers.IntegerField(source="pk")
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The first 8 characters of the secret.")
    state = serializers.SerializerMethodField(help_text="active, expired or revoked.")
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)
    revoked_reason = serializers.CharField(
        help_text='"owner", "password_changed", or "" while not revoked.'
    )

    class Meta:
        ref_name = "ApiToken"

    def get_state(self, token: ApiToken) -> str:
        """The token's state now."""
        return api_token_state(token, now=self.context.get("now"))


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    """A token just made, with its secret: shown this once, store it now."""

    token = serializers.CharField(help_text="The secret: send it as 'Authorization: Token …'.")

    class Meta:
        ref_name = "ApiTokenCreated"


class ApiTokenInputSerializer(serializers.Serializer):
    """What a new token is for and how long it lives."""

    name = StrictCharField(max_length=TOKEN_NAME_MAX)
    expires_in_days = serializers.IntegerField(
        min_value=1, max_value=TOKEN_MAX_DAYS, default=TOKEN_DEFAULT_DAYS
    )

    class Meta:
        ref_name = "ApiTokenInput"


def created_token_body(created: CreatedToken) -> dict[str, Any]:
    """Return the body answering a new token: its fields and its ``token`` secret."""
    token: Any = created.token
    token.token = created.secret
    return dict(ApiTokenCreatedSerializer(token, context={"now": timezone.now()}).data)


class AccountTokenListApi(APIView):
    """The signed-in user's API tokens: list them, make one."""

    pagination_class = CappedLimitOffsetPagination

    @extend_schema(
        operation_id="account_tokens_list", responses={200: ApiTokenSerializer(many=True)}
    )
    def get(self, request: Request) -> Response:
        """List the user's tokens, newest first (active, expired and revoked)."""
        return paginated(
            request,
            api_token_list(user=request_actor(request)),
            ApiTokenSerializer,
            context={"now": timezone.now()},
        )

    @extend_schema(
        operation_id="account_tokens_create",
        request=ApiTokenInputSerializer,
        responses={
            201: ApiTokenCreatedSerializer,
            400: OpenApiResponse(ErrorSerializer, description="An empty name or a bad lifetime."),
        },
    )
    def post(self, request: Request) -> Response:
        """Make a token; the answer's ``token`` is the secret, shown this once."""
        given = ApiTokenInputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        actor = request_actor(request)
        body = written(
            lambda: api_token_create(user=actor, **given.validated_data), created_token_body
        )
        return Response(body, status=status.HTTP_201_CREATED)


class AccountTokenDetailApi(APIView):
    """One of the signed-in user's tokens: revoke it."""

    @extend_schema(
        operation_id="account_tokens_revoke",
        responses={
            204: OpenApiResponse(description="Revoked (or already revoked)."),
            404: OpenApiResponse(ErrorSerializer, description="No such token of yours."),
        },
    )
    def delete(self, request: Request, token_id: int) -> Response:
        """Revoke the token: it authenticates no more; it stays listed as revoked."""
        api_token_revoke(actor=request_actor(request), token_id=token_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
