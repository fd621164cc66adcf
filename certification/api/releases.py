"""REST API of releases: list and freeze, read, rebuild, download files, move tags.

Adjudicators and managers read; managers download, freeze, rebuild and move tags; annotators
get 403 (as for the rest of certification: a release holds everybody's labels); non-members and
other projects' ids get 404. Releases are immutable: no endpoint accepts PUT, PATCH or DELETE
(405), and a correction is a new release whose ``parent`` is the one it corrects.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from certification.api.common import READ_REVIEWERS_WRITE_MANAGERS, viewer
from certification.downloads import release_file_response
from certification.models import Release, ReleaseBuild
from certification.selectors import (
    release_children,
    release_content_build,
    release_file_get,
    release_files,
    release_get,
    release_latest,
    release_list,
    release_manifest,
    release_tag_list,
)
from certification.services.releases import release_freeze, release_rebuild, release_tag_move
from certification.services.releases.freeze import MAX_NOTES
from labeling import permissions
from labeling.api.common import ErrorSerializer, written
from labeling.api.fields import StrictCharField
from labeling.api.lease import LeasedWorkSerializer
from labeling.api.pagination import CappedLimitOffsetPagination
from labeling.exceptions import InvalidInput, NotFound
from labeling.models import MAX_ID, Project
from labeling.release_format import MEDIA_TYPES

FORBIDDEN = OpenApiResponse(
    ErrorSerializer, description="An annotator, or (for writes) not a manager."
)
NOT_FOUND = OpenApiResponse(ErrorSerializer, description="No such project or release.")
INVALID = OpenApiResponse(ErrorSerializer, description="A field is invalid; ``field`` names it.")
CONFLICT = OpenApiResponse(
    ErrorSerializer,
    description="The release has no finished build yet, or a rebuild is already under way.",
)


def _release_in_body(project: Project, release_id: int, field: str) -> Release:
    """A release named in a request body: another project's id is a bad field (400)."""
    try:
        return release_get(project=project, release_id=release_id)
    except NotFound:
        raise InvalidInput(
            f"no release {release_id} in project {project.slug!r}", field=field, prefix=False
        ) from None


class ReleaseFileSerializer(serializers.Serializer):
    """One downloadable file of a release: name, sha256, size, media type, download URL."""

    name = serializers.CharField()
    sha256 = serializers.CharField()
    size = serializers.IntegerField(allow_null=True)
    media_type = serializers.CharField()
    url = serializers.SerializerMethodField()

    class Meta:
        ref_name = "ReleaseFile"

    def get_url(self, file: Any) -> str:
        release = self.context["release"]
        return reverse(
            "api-release-file",
            kwargs={"slug": release.project.slug, "release_id": release.pk, "name": file.name},
        )


class ReleaseBuildSerializer(LeasedWorkSerializer):
    """A build of a release's files.

    The first build is the release's content; a rebuild is compared with it byte by byte
    (``matches``, ``mismatches``).
    """

    id = serializers.IntegerField()
    status = serializers.CharField()
    is_rebuild = serializers.BooleanField()
    progress_done = serializers.IntegerField()
    progress_total = serializers.IntegerField()
    files = serializers.JSONField(help_text="Each built file's name, sha256, size, media type.")
    manifest_sha256 = serializers.CharField()
    archive_sha256 = serializers.CharField()
    archive_size = serializers.IntegerField(allow_null=True)
    matches = serializers.BooleanField(allow_null=True)
    mismatches = serializers.JSONField()
    error = serializers.CharField()
    requested_by = serializers.CharField(source="requested_by.username", allow_null=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)

    class Meta:
        ref_name = "ReleaseBuild"


class ReleaseSerializer(serializers.Serializer):
    """A release: version, parent, label policy, what it certifies, who froze it, its build."""

    id = serializers.IntegerField()
    version = serializers.CharField()
    parent = serializers.IntegerField(source="parent_id", allow_null=True)  # type: ignore[assignment]
    parent_version = serializers.CharField(source="parent.version", allow_null=True)
    policy_version = serializers.IntegerField(source="policy.version")
    certifies = serializers.JSONField(
        help_text="Each named spec and run with its hashes and, from schema 1.3, whether it "
        "certifies (certified; reason when it certifies nothing)."
    )
    notes = serializers.CharField()
    created_by = serializers.CharField(source="created_by.username")
    created_at = serializers.DateTimeField()
    tags = serializers.SerializerMethodField()
    build = serializers.SerializerMethodField()

    class Meta:
        ref_name = "Release"

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_tags(self, release: Release) -> list[str]:
        return [tag.name for tag in release.tags.all()]

    @extend_schema_field(ReleaseBuildSerializer(allow_null=True))
    def get_build(self, release: Release) -> dict[str, Any] | None:
        build = release_content_build(release)
        return None if build is None else ReleaseBuildSerializer(build).data


class ReleaseDetailSerializer(ReleaseSerializer):
    """A release with every build, its downloadable files and its manifest's counts."""

    builds = ReleaseBuildSerializer(many=True, source="builds.all")
    files = serializers.SerializerMethodField()
    counts = serializers.SerializerMethodField()
    children = serializers.SerializerMethodField()

    class Meta:
        ref_name = "ReleaseDetail"

    @extend_schema_field(ReleaseFileSerializer(many=True))
    def get_files(self, release: Release) -> list[dict[str, Any]]:
        files = release_files(release_content_build(release))
        return list(ReleaseFileSerializer(files, many=True, context={"release": release}).data)

    @extend_schema_field(serializers.JSONField(allow_null=True))
    def get_counts(self, release: Release) -> dict[str, Any] | None:
        """The manifest's ``counts`` (every count with its denominator); null until built."""
        manifest = release_manifest(release_content_build(release))
        return None if manifest is None else manifest.get("counts")

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_children(self, release: Release) -> list[int]:
        return list(release_children(release=release).values_list("pk", flat=True))


class ReleaseTagMoveSerializer(serializers.Serializer):
    """One placement of a tag."""

    release = serializers.IntegerField(source="release_id")
    previous = serializers.IntegerField(source="previous_id", allow_null=True)
    moved_by = serializers.CharField(source="moved_by.username")
    moved_at = serializers.DateTimeField()

    class Meta:
        ref_name = "ReleaseTagMove"


class ReleaseTagSerializer(serializers.Serializer):
    """A tag, the release it points at and every move it made (oldest first)."""

    name = serializers.CharField()
    release = serializers.IntegerField(source="release_id")
    release_version = serializers.CharField(source="release.version")
    moved_by = serializers.CharField(source="moved_by.username")
    moved_at = serializers.DateTimeField()
    moves = ReleaseTagMoveSerializer(many=True, source="moves.all")

    class Meta:
        ref_name = "ReleaseTag"


class ReleaseListApi(APIView):
    """The project's releases, newest first (adjudicators and managers); freeze one (managers)."""

    project_roles = READ_REVIEWERS_WRITE_MANAGERS

    pagination_class = CappedLimitOffsetPagination

    class InputSerializer(serializers.Serializer):
        version = StrictCharField(
            max_length=32, help_text='An increasing integer ("3") or MAJOR.MINOR.PATCH ("1.2.0").'
        )
        parent = serializers.IntegerField(  # type: ignore[assignment]
            required=False,
            allow_null=True,
            min_value=1,
            max_value=MAX_ID,
            help_text="The parent release's id; omitted: the latest release; null: none.",
        )
        runs = serializers.ListField(
            child=serializers.IntegerField(min_value=1, max_value=MAX_ID),
            required=False,
            allow_null=True,
            help_text="Calibration run ids to certify; omitted or null: the latest done run of "
            "every latest spec version; []: none.",
        )
        notes = StrictCharField(
            required=False, allow_blank=True, trim_whitespace=False, max_length=MAX_NOTES
        )

        class Meta:
            ref_name = "ReleaseFreezeInput"

    @extend_schema(
        operation_id="releases_list",
        responses={200: ReleaseSerializer(many=True), 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        """List the releases with their first build's status and progress and their tags."""
        project, _ = viewer(request, slug)
        paginator = CappedLimitOffsetPagination()
        page = paginator.paginate_queryset(release_list(project=project), request)
        return paginator.get_paginated_response(ReleaseSerializer(page, many=True).data)

    @extend_schema(
        operation_id="releases_freeze",
        request=InputSerializer,
        responses={201: ReleaseDetailSerializer, 400: INVALID, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def post(self, request: Request, slug: str) -> Response:
        """Freeze a release; its files are built in the background (``build.status``)."""
        project, _ = viewer(request, slug)
        given = self.InputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        if "parent" not in data:
            parent = release_latest(project=project)
        elif data["parent"] is None:
            parent = None
        else:
            parent = _release_in_body(project, data["parent"], "parent")
        body = written(
            lambda: release_freeze(
                project=project,
                actor=request.user,
                version=data["version"],
                parent=parent,
                run_ids=data.get("runs"),
                notes=data.get("notes", ""),
            ),
            lambda release: (
                ReleaseDetailSerializer(release_get(project=project, release_id=release.pk)).data
            ),
        )
        return Response(body, status=status.HTTP_201_CREATED)


class ReleaseDetailApi(APIView):
    """One release, immutable: no PUT, PATCH or DELETE.

    Every build, its files with hashes and download URLs, the manifest's counts (null until
    built), its tags and children.
    """

    project_roles = READ_REVIEWERS_WRITE_MANAGERS

    @extend_schema(
        operation_id="releases_retrieve",
        responses={200: ReleaseDetailSerializer, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str, release_id: int) -> Response:
        """Return the release."""
        project, _ = viewer(request, slug)
        release = release_get(project=project, release_id=release_id)
        return Response(ReleaseDetailSerializer(release).data)


class ReleaseRebuildApi(APIView):
    """Rebuild a release and compare every byte with its first build (managers)."""

    project_roles = READ_REVIEWERS_WRITE_MANAGERS

    @extend_schema(
        operation_id="releases_rebuild",
        request=None,
        responses={202: ReleaseBuildSerializer, 403: FORBIDDEN, 404: NOT_FOUND, 409: CONFLICT},
    )
    def post(self, request: Request, slug: str, release_id: int) -> Response:
        """Request a rebuild; its ``matches`` and ``mismatches`` are set when it is done."""
        project, _ = viewer(request, slug)
        release = release_get(project=project, release_id=release_id)
        body = written(
            lambda: release_rebuild(release=release, actor=request.user),
            lambda build: (
                ReleaseBuildSerializer(
                    ReleaseBuild.objects.select_related("requested_by").get(pk=build.pk)
                ).data
            ),
        )
        return Response(body, status=status.HTTP_202_ACCEPTED)


class _AnyAccept(BaseContentNegotiation):
    """A download answers whatever the client accepts (errors are JSON)."""

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser:
        return next(iter(parsers))

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderer = next(iter(renderers))
        return renderer, renderer.media_type


def _is_json(media_type: str) -> bool:
    """Whether ``media_type`` is JSON itself (application/json, application/ld+json), not JSONL."""
    return media_type == "application/json" or media_type.endswith("+json")


class ReleaseFileApi(APIView):
    """Download one file of a release's build, or ``release.zip`` (all of them), streamed.

    Managers only: the files hold pending items' evaluator labels and votes.
    """

    # Files hold pending items' evaluator labels and votes, which adjudicators must not see
    # before they decide (labeling/permissions.py): downloads are for managers.
    project_roles = {"GET": permissions.MANAGERS}

    content_negotiation_class = _AnyAccept

    @extend_schema(
        operation_id="releases_file_download",
        responses={
            **{
                (200, media_type): OpenApiResponse(
                    # A JSON file is parsed by clients (and by schema checkers) as JSON: any
                    # JSON value (the ledger is an array, the others objects); the rest are bytes.
                    OpenApiTypes.ANY if _is_json(media_type) else OpenApiTypes.BINARY,
                    description="The file as an attachment with X-Content-SHA256, in its own "
                    "media type: "
                    + ", ".join(f"{name}: {media}" for name, media in MEDIA_TYPES.items())
                    + " (text as UTF-8).",
                )
                for media_type in sorted(set(MEDIA_TYPES.values()))
            },
            302: OpenApiResponse(
                description="The release files are on an object store and downloads redirect "
                "(CERTLABEL_S3_REDIRECT_DOWNLOADS): Location is a presigned URL of the file, "
                "valid for CERTLABEL_S3_URL_SECONDS, whose answer is the attachment above; "
                "X-Content-SHA256 is on this answer. Send no Authorization header there."
            ),
            403: FORBIDDEN,
            404: OpenApiResponse(
                ErrorSerializer, description="No such release, not built yet, or no such file."
            ),
        },
    )
    def get(self, request: Request, slug: str, release_id: int, name: str) -> Any:
        """Stream the file ``name`` (one the build lists, or release.zip), or redirect to it."""
        project, _ = viewer(request, slug)
        release = release_get(project=project, release_id=release_id)
        file, build = release_file_get(release=release, name=name)
        return release_file_response(project, release, build, file, method=request.method or "GET")


class ReleaseTagListApi(APIView):
    """The project's tags with their history (adjudicators and managers); move one (managers)."""

    project_roles = READ_REVIEWERS_WRITE_MANAGERS

    class InputSerializer(serializers.Serializer):
        name = StrictCharField(max_length=64, help_text="e.g. latest, paper-v1")
        release = serializers.IntegerField(min_value=1, max_value=MAX_ID)

        class Meta:
            ref_name = "ReleaseTagInput"

    @extend_schema(
        operation_id="release_tags_list",
        responses={200: ReleaseTagSerializer(many=True), 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        """List the tags by name."""
        project, _ = viewer(request, slug)
        return Response(ReleaseTagSerializer(release_tag_list(project=project), many=True).data)

    @extend_schema(
        operation_id="release_tags_move",
        request=InputSerializer,
        responses={200: ReleaseTagSerializer, 400: INVALID, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def post(self, request: Request, slug: str) -> Response:
        """Point the tag ``name`` at ``release`` (created if new; every move is kept)."""
        project, _ = viewer(request, slug)
        given = self.InputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        release = _release_in_body(project, given.validated_data["release"], "release")
        body = written(
            lambda: release_tag_move(
                project=project,
                actor=request.user,
                name=given.validated_data["name"],
                release=release,
            ),
            lambda tag: ReleaseTagSerializer(release_tag_list(project=project).get(pk=tag.pk)).data,
        )
        return Response(body)
