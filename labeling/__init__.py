"""certlabel's labelling app and project wiring (settings, urls, Celery app).

Importing the package loads nothing else: ``labeling.vocabulary`` (the label names, which the
statistics import too) must not start the Celery app. The app (``labeling.celery``) is created
when Django sets up (``LabelingConfig.ready``), and ``celery -A labeling`` finds it there;
``labeling.celery_app`` still names it, loaded on first use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["celery_app"]


def __getattr__(name: str) -> Any:
    """``celery_app``: the Celery application, imported on first use (PEP 562)."""
    if name == "celery_app":
        from labeling.celery import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
