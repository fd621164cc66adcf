"""Pagination of every list endpoint."""

from __future__ import annotations

from typing import Any

from rest_framework.pagination import LimitOffsetPagination

from labeling.models import MAX_ID


class CappedLimitOffsetPagination(LimitOffsetPagination):
    """``?limit=&offset=`` with 50 rows by default and at most 500 a page.

    A larger ``limit`` is capped at 500; a malformed one (``?limit=0``, ``?offset=null``) is
    refused with a 400 by ``labeling.api.params.QueryParameterCheck``, from the bounds stated
    here in the schema.
    """

    default_limit = 50
    max_limit = 500

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        """Return the ``limit`` and ``offset`` parameters with their bounds."""
        parameters: list[dict[str, Any]] = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            schema = parameter["schema"]
            if parameter["name"] == self.limit_query_param:
                schema.update(minimum=1, maximum=MAX_ID)
                parameter["description"] = (
                    f"Rows per page: {self.default_limit} by default, at most {self.max_limit} "
                    "(a larger limit is capped)."
                )
            elif parameter["name"] == self.offset_query_param:
                schema.update(minimum=0, maximum=MAX_ID)
        return parameters
