"""Pagination of every list endpoint."""

from rest_framework.pagination import LimitOffsetPagination


class CappedLimitOffsetPagination(LimitOffsetPagination):
    """``?limit=&offset=`` with 50 rows by default and at most 500 a page."""

    default_limit = 50
    max_limit = 500
