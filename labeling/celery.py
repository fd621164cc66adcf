"""The Celery application of certlabel (``celery -A labeling worker``)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "labeling.settings")

app = Celery("labeling")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
