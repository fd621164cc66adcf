"""The OpenAPI schema states the error contract and the parameters' constraints.

- :class:`ContractAutoSchema` (``DEFAULT_SCHEMA_CLASS``) adds the ``Error`` response
  (``labeling.api.common.ErrorSerializer``) for every error status an operation can answer and
  does not document itself, so a new endpoint gets them with no code of its own;
- :func:`postprocess_parameters` (a drf-spectacular postprocessing hook) states what
  ``labeling.api.params.QueryParameterCheck`` enforces: a query string is never empty, an id in
  a path is at most ``MAX_ID``; and every error body's ``code`` is one of the registered error
  codes (``labeling.exceptions.error_codes``).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse

from labeling.exceptions import error_codes
from labeling.models import MAX_ID

#: The error statuses of every operation, with what they mean here.
DEFAULT_ERRORS: dict[int, str] = {
    400: "Invalid input (a body field or a query parameter; `errors[].field` names it), or a "
    "malformed body.",
    401: "Not authenticated.",
    403: "The role does not allow it.",
    404: "No such project (or not a member), or no such object in it.",
    405: "Method not allowed.",
    406: "The Accept header asks for a type the endpoint does not serve.",
    413: "The request body is too large.",
    415: "Unsupported media type of the body.",
    429: "Too many requests (`Retry-After` tells when to retry).",
    500: "Unexpected server error.",
    503: "The database is unavailable (`Retry-After` tells when to retry); nothing was written.",
}
#: Added to operations that write (anything but GET and HEAD).
WRITE_ERRORS: dict[int, str] = {
    409: "The object's state does not allow it, or it changed since it was read.",
}


class ContractAutoSchema(AutoSchema):
    """drf-spectacular's schema, with the ``Error`` body on every undocumented error status."""

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        from labeling.api.common import ErrorSerializer

        responses: dict[str, Any] = super()._get_response_bodies(direction)
        extra = dict(DEFAULT_ERRORS)
        if self.method not in ("GET", "HEAD"):
            extra.update(WRITE_ERRORS)
        for status, description in extra.items():
            if str(status) not in responses:
                response = OpenApiResponse(ErrorSerializer, description=description)
                responses[str(status)] = self._get_response_for_code(
                    response, str(status), direction=direction
                )
        return dict(sorted(responses.items()))


def postprocess_parameters(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """State the parameter rules the API enforces (a drf-spectacular postprocessing hook).

    A query parameter of type string has ``minLength`` 1 (an empty value is refused, not
    ignored); an integer in a path is between 0 and ``MAX_ID``. The ``code`` of every error
    body (a component with ``detail``, ``code`` and ``errors``) is an enum of the error codes.
    """
    for component in result.get("components", {}).get("schemas", {}).values():
        properties = component.get("properties", {})
        if {"detail", "code", "errors"} <= properties.keys():
            properties["code"] = {**properties["code"], "enum": error_codes()}
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                kind = schema.get("type")
                if parameter.get("in") == "query" and kind == "string" and "enum" not in schema:
                    schema.setdefault("minLength", 1)
                if parameter.get("in") == "path" and kind == "integer":
                    schema.setdefault("minimum", 0)
                    schema.setdefault("maximum", MAX_ID)
    return result
