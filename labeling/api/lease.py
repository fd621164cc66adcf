"""The fields every piece of background work shows in the API: attempts and liveness."""

from __future__ import annotations

from rest_framework import serializers


class LeasedWorkSerializer(serializers.Serializer):
    """Base of the job, run and build serializers: attempts and liveness.

    How many times a worker took the work on, when it first started, its last heartbeat, and
    whether its worker was lost (the engine resumes it within a minute).
    """

    attempts = serializers.IntegerField(help_text="How many times a worker took the work on.")
    started_at = serializers.DateTimeField(
        allow_null=True, help_text="When the first attempt started."
    )
    heartbeat_at = serializers.DateTimeField(
        allow_null=True, help_text="The last heartbeat of the worker holding it."
    )
    worker_lost = serializers.BooleanField(
        help_text="A worker holds it but its heartbeat lapsed: it is being resumed."
    )
