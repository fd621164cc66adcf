"""The one mapping from domain errors to HTTP status codes, for the API and for the pages.

``labeling/api_errors.py`` turns a domain error into a JSON body with this status;
``labeling/views/errors.py`` turns one that a page did not handle into the matching page. Both
read :func:`http_status`, so a page and an endpoint never disagree. Certification's errors
subclass these classes (``certification/exceptions.py``) and so map through the same table.
"""

from __future__ import annotations

from http import HTTPStatus

from labeling import exceptions as domain

#: The classes are disjoint, so their order does not matter; a subclass maps as its base.
STATUS_BY_ERROR: tuple[tuple[type[domain.LabelingError], int], ...] = (
    (domain.NotFound, HTTPStatus.NOT_FOUND),
    (domain.PermissionDenied, HTTPStatus.FORBIDDEN),
    (domain.InvalidTransition, HTTPStatus.CONFLICT),
    (domain.Conflict, HTTPStatus.CONFLICT),
    (domain.InvalidInput, HTTPStatus.BAD_REQUEST),
)
#: The status of a domain error outside the table (a bare ``LabelingError``).
DEFAULT_STATUS = HTTPStatus.BAD_REQUEST


def http_status(error: domain.LabelingError) -> int:
    """Return the HTTP status of ``error``: the first class of the table it is an instance of."""
    return next(
        (int(code) for cls, code in STATUS_BY_ERROR if isinstance(error, cls)), int(DEFAULT_STATUS)
    )
