"""REST API of people: members and invitations.

A project's members and invitations are for its managers; an account lists, accepts and
declines its own invitations. Thin adapters over ``labeling.services.members`` and
``labeling.selectors.members``; the services check the roles again and keep a project's last
active manager. Creating an invitation answers the same whether the invitee has an account
or not.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling import permissions
from labeling.api.common import ErrorSerializer, paginated, project_and_role, request_actor, written
from labeling.api.fields import StrictBooleanField, StrictCharField
from labeling.api.pagination import CappedLimitOffsetPagination
from labeling.models import Role
from labeling.selectors.members import invitation_list, invitations_for_user
from labeling.selectors.pages import member_list
from labeling.services.members import (
    invitation_accept,
    invitation_create,
    invitation_decline,
    invitation_revoke,
    membership_change,
    membership_deactivate,
    membership_reactivate,
    membership_remove,
)

NOT_FOUND = OpenApiResponse(
    ErrorSerializer, description="No such project (or not a member), or no such object in it."
)
FORBIDDEN = OpenApiResponse(
    ErrorSerializer, description="Not authenticated, or the role does not allow it."
)
BAD_INPUT = OpenApiResponse(
    ErrorSerializer, description="Invalid input: `errors` names each field."
)
LAST_MANAGER = OpenApiResponse(
    ErrorSerializer, description="The project's last active manager cannot be demoted or removed."
)
NOT_PENDING = OpenApiResponse(
    ErrorSerializer, description="The invitation is no longer pending, or it expired."
)


class MemberSerializer(serializers.Serializer):
    """A member of the project, their role and whether they are active (managers only)."""

    user_id = serializers.IntegerField()
    username = serializers.CharField(source="user.username")
    role = serializers.CharField()
    is_active = StrictBooleanField(
        help_text="False for a deactivated member: no role in the project, no lease."
    )

    class Meta:
        ref_name = "Member"


class InvitationSerializer(serializers.Serializer):
    """An invitation as its project's managers see it (never whether an account exists)."""

    id = serializers.IntegerField()
    invitee = serializers.CharField(help_text="The username or e-mail address invited.")
    role = serializers.CharField()
    status = serializers.ChoiceField(
        source="state",
        choices=["pending", "accepted", "declined", "revoked", "expired"],
        help_text="`expired`: pending past `expires_at`.",
    )
    invited_by = serializers.CharField(source="invited_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()

    class Meta:
        ref_name = "Invitation"


class InvitationSentSerializer(InvitationSerializer):
    """A new invitation, and whether its e-mail failed to send (it stands either way)."""

    email_failed = serializers.SerializerMethodField(
        help_text="True when an e-mail was due and could not be sent (logged)."
    )

    class Meta:
        ref_name = "InvitationSent"

    def get_email_failed(self, invitation: Any) -> bool:
        """Read the flag the view put in the context."""
        return bool(self.context.get("email_failed"))


class OwnInvitationSerializer(serializers.Serializer):
    """An invitation addressed to the requesting account, to accept or decline."""

    id = serializers.IntegerField()
    project = serializers.SlugField(source="project.slug")
    project_name = serializers.CharField(source="project.name")
    role = serializers.CharField()
    invited_by = serializers.CharField(source="invited_by.username", allow_null=True, default=None)
    expires_at = serializers.DateTimeField()

    class Meta:
        ref_name = "OwnInvitation"


class MemberListApi(APIView):
    """The project's members by role, then username (managers)."""

    project_roles = {"GET": permissions.MANAGERS}
    pagination_class = CappedLimitOffsetPagination

    @extend_schema(
        operation_id="members_list",
        responses={200: MemberSerializer(many=True), 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        """List the members, deactivated ones included."""
        project, _ = project_and_role(request, slug)
        return paginated(request, member_list(project=project), MemberSerializer)


class MemberDetailApi(APIView):
    """Change a member's role or active state, or remove them (managers).

    The last active manager cannot be demoted, deactivated or removed (409).
    """

    project_roles = {"PATCH": permissions.MANAGERS, "DELETE": permissions.MANAGERS}

    class InputSerializer(serializers.Serializer):
        role = serializers.ChoiceField(choices=Role.choices, required=False)
        is_active = StrictBooleanField(
            required=False,
            help_text="false deactivates (leases given back), true reactivates.",
        )

        class Meta:
            ref_name = "MemberUpdateInput"

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            """Refuse a body that changes nothing."""
            if not attrs:
                raise serializers.ValidationError("give role, is_active or both")
            return attrs

    @extend_schema(
        operation_id="members_update",
        request=InputSerializer,
        responses={
            200: MemberSerializer,
            400: BAD_INPUT,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: LAST_MANAGER,
        },
    )
    def patch(self, request: Request, slug: str, user_id: int) -> Response:
        """Set the member's role and/or active state (the role first)."""
        project, _ = project_and_role(request, slug)
        given = self.InputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        actor = request_actor(request)

        def write() -> Any:
            membership: Any = None
            if "role" in data:
                membership = membership_change(
                    project=project, actor=actor, user_id=user_id, role=data["role"]
                )
            if "is_active" in data:
                toggle = membership_reactivate if data["is_active"] else membership_deactivate
                membership = toggle(project=project, actor=actor, user_id=user_id)
            return membership

        body = written(write, lambda membership: MemberSerializer(membership).data)
        return Response(body)

    @extend_schema(
        operation_id="members_remove",
        request=None,
        responses={204: None, 403: FORBIDDEN, 404: NOT_FOUND, 409: LAST_MANAGER},
    )
    def delete(self, request: Request, slug: str, user_id: int) -> Response:
        """Remove the member; their labels stay, their leases are given back."""
        project, _ = project_and_role(request, slug)
        written(
            lambda: membership_remove(
                project=project, actor=request_actor(request), user_id=user_id
            ),
            lambda _: None,
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class InvitationListApi(APIView):
    """The project's invitations, newest first (GET), or invite someone (POST) (managers)."""

    project_roles = {"GET": permissions.MANAGERS, "POST": permissions.MANAGERS}
    pagination_class = CappedLimitOffsetPagination

    class InputSerializer(serializers.Serializer):
        invitee = StrictCharField(
            max_length=254, help_text="A username, or an e-mail address (with @)."
        )
        role = serializers.ChoiceField(choices=Role.choices)

        class Meta:
            ref_name = "InvitationInput"

    @extend_schema(
        operation_id="invitations_list",
        responses={200: InvitationSerializer(many=True), 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        """List the invitations."""
        project, _ = project_and_role(request, slug)
        return paginated(request, invitation_list(project=project), InvitationSerializer)

    @extend_schema(
        operation_id="invitations_create",
        request=InputSerializer,
        responses={201: InvitationSentSerializer, 400: BAD_INPUT, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def post(self, request: Request, slug: str) -> Response:
        """Invite by username or e-mail; the answer is the same whether an account exists.

        An existing account accepts on its project list; an unknown e-mail address gets a
        one-time join link by e-mail. Nobody becomes a member here.
        """
        project, _ = project_and_role(request, slug)
        given = self.InputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        body = written(
            lambda: invitation_create(
                project=project,
                actor=request_actor(request),
                site=request.build_absolute_uri("/"),
                **given.validated_data,
            ),
            lambda sent: (
                InvitationSentSerializer(
                    sent.invitation, context={"email_failed": sent.email_failed}
                ).data
            ),
        )
        return Response(body, status=status.HTTP_201_CREATED)


class InvitationDetailApi(APIView):
    """Revoke a pending invitation of the project (managers); its link stops working."""

    project_roles = {"DELETE": permissions.MANAGERS}

    @extend_schema(
        operation_id="invitations_revoke",
        request=None,
        responses={204: None, 403: FORBIDDEN, 404: NOT_FOUND, 409: NOT_PENDING},
    )
    def delete(self, request: Request, slug: str, invitation_id: int) -> Response:
        """Revoke the invitation (it stays listed as revoked)."""
        project, _ = project_and_role(request, slug)
        written(
            lambda: invitation_revoke(
                project=project, actor=request_actor(request), invitation_id=invitation_id
            ),
            lambda _: None,
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class OwnInvitationListApi(APIView):
    """The pending invitations addressed to the requesting account, newest first."""

    pagination_class = CappedLimitOffsetPagination

    @extend_schema(
        operation_id="own_invitations_list",
        responses={200: OwnInvitationSerializer(many=True), 401: FORBIDDEN},
    )
    def get(self, request: Request) -> Response:
        """List the account's pending invitations."""
        invitations = invitations_for_user(user=request_actor(request))
        return paginated(request, invitations, OwnInvitationSerializer)


class OwnInvitationAcceptApi(APIView):
    """Accept an invitation addressed to the requesting account: it becomes a member."""

    @extend_schema(
        operation_id="own_invitations_accept",
        request=None,
        responses={
            200: MemberSerializer,
            401: FORBIDDEN,
            404: OpenApiResponse(ErrorSerializer, description="No such invitation of yours."),
            409: NOT_PENDING,
        },
    )
    def post(self, request: Request, invitation_id: int) -> Response:
        """Accept; the answer is the new membership."""
        body = written(
            lambda: invitation_accept(invitation_id=invitation_id, actor=request_actor(request)),
            lambda membership: MemberSerializer(membership).data,
        )
        return Response(body)


class OwnInvitationDeclineApi(APIView):
    """Decline an invitation addressed to the requesting account."""

    @extend_schema(
        operation_id="own_invitations_decline",
        request=None,
        responses={
            204: None,
            401: FORBIDDEN,
            404: OpenApiResponse(ErrorSerializer, description="No such invitation of yours."),
            409: NOT_PENDING,
        },
    )
    def post(self, request: Request, invitation_id: int) -> Response:
        """Decline the invitation."""
        written(
            lambda: invitation_decline(invitation_id=invitation_id, actor=request_actor(request)),
            lambda _: None,
        )
        return Response(status=status.HTTP_204_NO_CONTENT)
