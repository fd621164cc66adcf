"""File responses shared by the certification pages and the API: release file downloads.

The HTML pages (``certification.views``) and the REST API (``certification.api``) check roles
and look the file up themselves; both stream it with :func:`release_file_response`.
"""

from __future__ import annotations

from django.http import FileResponse

from certification.models import Release, ReleaseBuild
from certification.selectors import ReleaseFile, release_file_stream
from labeling.models import Project
from labeling.release_format import ARCHIVE

#: Bytes read from a release file at a time while it is streamed.
DOWNLOAD_BLOCK = 1 << 20


def release_file_response(
    project: Project, release: Release, build: ReleaseBuild, file: ReleaseFile
) -> FileResponse:
    """Return a streaming attachment of one file of a release's build.

    It carries the file's media type (text as UTF-8), its name (the archive as
    ``<project>-<version>.zip``), its length when known and its sha256 (``X-Content-SHA256``).
    """
    filename = f"{project.slug}-{release.version}.zip" if file.name == ARCHIVE else file.name
    content_type = file.media_type or "application/octet-stream"
    if content_type.startswith("text/"):
        content_type += "; charset=utf-8"
    response = FileResponse(
        release_file_stream(build=build, file=file),
        as_attachment=True,
        filename=filename,
        content_type=content_type,
    )
    # Read in blocks of 1 MiB rather than FileResponse's 4 KiB: a server without a file
    # wrapper (sendfile) otherwise loops 75,000 times over a 300 MB labels file.
    response.block_size = DOWNLOAD_BLOCK
    if file.size is not None:
        response["Content-Length"] = str(file.size)
    response["X-Content-SHA256"] = file.sha256
    return response
