"""Reading a stored file wherever its Django storage keeps it: a local directory or an object store.

``settings.STORAGES`` names two storages that several machines share: ``releases`` (built
release files) and ``jobs`` (uploads waiting for their job). Each is a local
``FileSystemStorage`` or, with ``CERTLABEL_S3_BUCKET`` set, django-storages' ``S3Storage``.
Code that serves or copies such a file reads it through :func:`storage_read_stream` (in order,
from the first byte, never whole in memory) and offers a client :func:`storage_download_url`
where the store has one.
"""

from __future__ import annotations

from types import TracebackType
from typing import IO, Any

from django.core.files.storage import FileSystemStorage, Storage
from django.utils.http import content_disposition_header


class ObjectStream:
    """A stored object's bytes as they arrive from the store: read in order, then closed.

    Not seekable and without ``fileno``: a ``FileResponse`` streams it block by block and a
    WSGI server's ``sendfile`` leaves it alone.
    """

    def __init__(self, body: Any, size: int | None, name: str) -> None:
        self._body = body
        #: The object's length in bytes, as the store reported it.
        self.size = size
        self.name = name

    def read(self, size: int | None = -1) -> bytes:
        """Return up to ``size`` bytes (all that remain when ``size`` is None or negative)."""
        data: bytes = self._body.read(None if size is None or size < 0 else size)
        return data

    def readable(self) -> bool:
        """Always True: the stream is for reading."""
        return True

    def close(self) -> None:
        """Release the store's connection."""
        self._body.close()

    def __enter__(self) -> ObjectStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def storage_is_local(storage: Storage) -> bool:
    """Whether ``storage`` keeps its files in a directory of this machine."""
    return isinstance(storage, FileSystemStorage)


def _s3(storage: Storage) -> Any:
    """``storage`` when it is django-storages' S3 backend, else None."""
    if storage_is_local(storage):
        return None
    try:
        from storages.backends.s3 import S3Storage
    except ImportError:  # django-storages without boto3: no S3 storage can be configured
        return None
    return storage if isinstance(storage, S3Storage) else None


def storage_read_stream(storage: Storage, name: str) -> IO[bytes] | ObjectStream:
    """Open the stored file ``name`` for reading its bytes in order.

    A local file is opened as ``storage.open`` does. An S3 object is one GET whose body is
    handed over as it arrives (``storage.open`` would first copy the whole object into memory
    or a temporary file). Any other storage: ``storage.open``.

    Raises:
        FileNotFoundError: no such file.
    """
    s3 = _s3(storage)
    if s3 is None:
        return storage.open(name, "rb")
    handle = s3.open(name, "rb")  # a HEAD request: FileNotFoundError when there is no object
    response = handle.obj.get()
    return ObjectStream(response["Body"], response.get("ContentLength"), handle.name)


def storage_download_url(
    storage: Storage, name: str, *, filename: str, content_type: str, method: str = "GET"
) -> str | None:
    """Return a URL a client fetches the stored file from directly, or None (a local storage).

    For an S3 storage: a presigned URL valid for the storage's ``querystring_expire`` seconds,
    for ``method`` (GET or HEAD), whose answer carries ``content_type`` and an attachment
    Content-Disposition naming ``filename``.
    """
    s3 = _s3(storage)
    if s3 is None:
        return None
    parameters = {
        "ResponseContentDisposition": content_disposition_header(True, filename),
        "ResponseContentType": content_type,
    }
    url: str = s3.url(name, parameters=parameters, http_method=method)
    return url
