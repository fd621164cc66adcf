"""Serializer fields of the API's inputs."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


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
