"""certlabel's labelling app and project wiring (settings, urls, Celery app)."""

from labeling.celery import app as celery_app

__all__ = ["celery_app"]
