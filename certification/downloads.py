"""File responses shared by the certification pages and the API: release file downloads.

The HTML pages (``certification.views``) and the REST API (``certification.api``) check roles
and look the file up themselves; both answer with :func:`release_file_response`: the file
streamed through this process, or, when the release storage is an object store and
``settings.RELEASE_DOWNLOAD_REDIRECT`` is on, a redirect to a presigned URL of it.
"""

from __future__ import annotations

from django.conf import settings
from django.http import FileResponse, HttpResponseRedirect
from django.http.response import HttpResponseBase
from django.utils.cache import add_never_cache_headers

from certification.models import Release, ReleaseBuild
from certification.selectors import ReleaseFile, release_file_stream, release_storage
from labeling.models import Project
from labeling.release_format import ARCHIVE
from labeling.storage import storage_download_url

#: Bytes read from a release file at a time while it is streamed.
DOWNLOAD_BLOCK = 1 << 20


def release_file_response(
    project: Project,
    release: Release,
    build: ReleaseBuild,
    file: ReleaseFile,
    *,
    method: str = "GET",
) -> HttpResponseBase:
    """Return one file of a release's build as an attachment, or a redirect to it.

    The attachment carries the file's media type (text as UTF-8), its name (the archive as
    ``<project>-<version>.zip``), its length when known and its sha256 (``X-Content-SHA256``).
    From an object store with ``RELEASE_DOWNLOAD_REDIRECT`` on, the answer is a 302 to a
    presigned URL for ``method`` (GET or HEAD) whose answer has the same media type and name;
    the 302 itself carries ``X-Content-SHA256`` and is never cached (the URL expires).
    """
    filename = f"{project.slug}-{release.version}.zip" if file.name == ARCHIVE else file.name
    content_type = file.media_type or "application/octet-stream"
    if content_type.startswith("text/"):
        content_type += "; charset=utf-8"
    if settings.RELEASE_DOWNLOAD_REDIRECT:
        url = storage_download_url(
            release_storage(),
            build.storage_prefix + file.name,
            filename=filename,
            content_type=content_type,
            method="HEAD" if method == "HEAD" else "GET",
        )
        if url is not None:
            redirect = HttpResponseRedirect(url)
            redirect["X-Content-SHA256"] = file.sha256
            add_never_cache_headers(redirect)
            return redirect
    stream = release_file_stream(build=build, file=file)
    response = FileResponse(
        stream,
        as_attachment=True,
        filename=filename,
        content_type=content_type,
    )
    # Read in blocks of 1 MiB rather than FileResponse's 4 KiB: a server without a file
    # wrapper (sendfile) otherwise loops 75,000 times over a 300 MB labels file.
    response.block_size = DOWNLOAD_BLOCK
    if file.size is not None:
        response["Content-Length"] = str(file.size)
    elif "Content-Length" not in response and getattr(stream, "size", None) is not None:
        response["Content-Length"] = str(stream.size)  # an object store's own count
    response["X-Content-SHA256"] = file.sha256
    return response
