"""Serializer fields of the API's inputs."""

from __future__ import annotations

from typing import Any

from django.http import QueryDict
from rest_framework import serializers
from rest_framework.fields import empty


class StrictCharField(serializers.CharField):
    """A string field that refuses non-strings: JSON ``0`` is not the name ``"0"``.

    DRF's ``CharField`` turns integers and floats into their text; an input whose schema says
    ``string`` refuses them with a 400 naming the field (form-encoded values are strings).
    """

    default_error_messages = {"invalid": "Not a valid string: a string is required."}

    def to_internal_value(self, data: Any) -> str:
        """Refuse anything but a ``str``, then validate as ``CharField`` does."""
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class StrictBooleanField(serializers.BooleanField):
    """A boolean field that takes true or false only, as JSON or as the text of a form field.

    DRF's ``BooleanField`` also takes ``1``, ``"yes"``, ``"on"``, ``"T"`` and more; the schema
    says ``boolean``, so a JSON body gives ``true`` or ``false``, and a form-encoded body (whose
    values are all text) the text ``true`` or ``false``. Anything else is a 400 naming the field.
    And a boolean a form leaves out is left out: DRF reads it as ``false`` (an unticked HTML
    checkbox sends nothing), which would turn a form PATCH of ``role`` alone into a
    deactivation.
    """

    default_error_messages = {"invalid": "Must be true or false."}
    default_empty_html = empty

    def to_internal_value(self, data: Any) -> bool:
        """Map ``true``/``false`` (and, in a form, their text); refuse the rest."""
        if isinstance(data, bool):
            return data
        if isinstance(getattr(self.root, "initial_data", None), QueryDict):
            if data == "true":
                return True
            if data == "false":
                return False
        self.fail("invalid")
        raise AssertionError("unreachable")  # self.fail raises
