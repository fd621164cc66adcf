"""Query and path parameters are checked against the OpenAPI schema before a handler runs.

:class:`QueryParameterCheck` (the last of ``DEFAULT_PERMISSION_CLASSES``, so after the login
and the role check) looks up the operation's parameters in the schema drf-spectacular builds
from the views (once per process) and refuses, with a 400 naming the parameter:

- an **unknown** query parameter: a misspelt filter (``?partiton=dev``) would otherwise return
  the unfiltered list as if it were filtered, the same reason a calibration spec refuses
  unknown fields;
- a parameter given several times (unless it is an array);
- an **empty** value (``?generator=``): omit the parameter instead;
- a value of the wrong type (``?offset=null``, ``?limit=ten``), outside its ``enum``, or
  outside its ``minimum``/``maximum``/``maxLength``/``pattern``.

An id in the path above ``MAX_ID`` cannot exist: 404. So the schema is the one statement of
what a parameter accepts, and a new endpoint's parameters are checked as soon as it documents
them (``@extend_schema(parameters=[...])``); an undocumented parameter is refused.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from typing import TYPE_CHECKING, Any

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

if TYPE_CHECKING:
    from rest_framework.views import APIView

_INTEGER = re.compile(r"-?[0-9]{1,30}")
_NUMBER = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_BOOLEANS = ("true", "false")
#: Why a decimal parameter's text is refused (drf-spectacular states a DecimalField as a pattern).
DECIMAL_REASON = "must be a plain decimal number such as 0.05 (no exponent, NaN or inf)"


# Building the schema is not thread-safe: drf-spectacular loads its extensions' classes on
# first use by rewriting class attributes, and two threads of a gthread worker building it at
# once have seen each other's half-loaded state (an AttributeError, so a 500, on the first
# requests after a worker starts). One thread builds it; the others wait for the result.
_TABLE_LOCK = threading.Lock()


def parameter_table() -> dict[tuple[type, str], dict[str, dict[str, Any]]]:
    """Return ``{(view class, method): {(in, name): schema}}`` from the generated schema.

    Built once per process, by one thread at a time (see ``_TABLE_LOCK``); the WSGI entry
    point builds it before the first request.
    """
    with _TABLE_LOCK:
        return _parameter_table()


@functools.cache
def _parameter_table() -> dict[tuple[type, str], dict[str, dict[str, Any]]]:
    from drf_spectacular.generators import SchemaGenerator

    generator = SchemaGenerator()
    schema = generator.get_schema(request=None, public=True)
    components = schema.get("components", {}).get("schemas", {})
    table: dict[tuple[type, str], dict[str, dict[str, Any]]] = {}
    endpoints: list[Any] = list(generator.endpoints or [])
    for endpoint in endpoints:
        path, method, callback = endpoint[0], endpoint[2], endpoint[3]
        operation = schema.get("paths", {}).get(path, {}).get(method.lower())
        cls = getattr(callback, "cls", None)
        if operation is None or cls is None:
            continue
        parameters: dict[str, dict[str, Any]] = {}
        for parameter in operation.get("parameters", []):
            item = parameter.get("schema", {})
            if "$ref" in item:
                item = components.get(item["$ref"].rsplit("/", 1)[-1], item)
            parameters[f"{parameter['in']}:{parameter['name']}"] = item
        table[(cls, method.upper())] = parameters
    return table


def _number_reason(value: str, schema: dict[str, Any], integer: bool) -> str | None:
    """Why ``value`` is not a number of ``schema`` (None: it is)."""
    pattern = _INTEGER if integer else _NUMBER
    if not pattern.fullmatch(value):
        return "must be an integer" if integer else "must be a number"
    number = int(value) if integer else float(value)
    if not math.isfinite(number):
        return "must be a finite number"
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and number < low:
        return f"must be at least {low}"
    if high is not None and number > high:
        return f"must be at most {high}"
    return None


def value_reason(values: list[str], schema: dict[str, Any]) -> str | None:
    """Return why the query values are not valid for ``schema``, or None when they are."""
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items", {})
        return next((r for v in values if (r := value_reason([v], items)) is not None), None)
    if len(values) > 1:
        return f"give one value, not {len(values)}"
    value = values[0]
    if value == "":
        return "must not be empty (omit the parameter instead)"
    if "enum" in schema and value not in [str(e) for e in schema["enum"] if e is not None]:
        choices = ", ".join(str(e) for e in schema["enum"] if e is not None)
        return f"must be one of: {choices}"
    if kind in ("integer", "number"):
        return _number_reason(value, schema, integer=kind == "integer")
    if kind == "boolean" and value not in _BOOLEANS:
        return "must be true or false"
    if kind == "string":
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"at most {schema['maxLength']} characters"
        if "pattern" in schema and not re.search(schema["pattern"], value):
            if schema.get("format") == "decimal":
                return DECIMAL_REASON
            return f"must match {schema['pattern']}"
    return None


class QueryParameterCheck(BasePermission):
    """Refuse malformed, empty and unknown query parameters (see the module); allows otherwise.

    A permission class so that every API view gets it from ``DEFAULT_PERMISSION_CLASSES``
    after authentication and the role check (401 and 403 come before a 400), with no base
    class to remember. A view the schema does not describe is not checked.
    """

    def has_permission(self, request: Request, view: APIView) -> bool:
        """Check the request's parameters against the operation's (raises when refused)."""
        method = "GET" if request.method == "HEAD" else (request.method or "").upper()
        parameters = parameter_table().get((type(view), method))
        if parameters is None:
            return True
        for name, value in (getattr(view, "kwargs", None) or {}).items():
            schema = parameters.get(f"path:{name}")
            if schema is not None and value_reason([str(value)], schema) is not None:
                raise NotFound(f"no object with {name} {value}")
        errors: dict[str, list[str]] = {}
        for name in request.query_params:
            schema = parameters.get(f"query:{name}")
            if schema is None:
                known = sorted(key[6:] for key in parameters if key.startswith("query:"))
                errors[name] = [
                    "unknown query parameter"
                    + (f" (known: {', '.join(known)})" if known else " (this endpoint takes none)")
                ]
                continue
            reason = value_reason(request.query_params.getlist(name), schema)
            if reason is not None:
                errors[name] = [reason]
        if errors:
            raise ValidationError(errors)
        return True
