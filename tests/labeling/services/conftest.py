"""Fixtures of the labelling service tests."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone


class Clock:
    """A controllable ``timezone.now``."""

    def __init__(self) -> None:
        self.now = timezone.now()

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """``timezone.now`` stopped at the test's start; ``clock.advance(minutes=…)`` moves it."""
    clock = Clock()
    monkeypatch.setattr(timezone, "now", lambda: clock.now)
    return clock
