"""Errors raised by ``certification.stats``; they import nothing from the project."""


class StatsError(ValueError):
    """Base class of every statistics error (a ``ValueError``: the input was unusable)."""


class InsufficientDataError(StatsError):
    """Too few observations for the statistic to be defined."""
