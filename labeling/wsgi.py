"""WSGI entry point."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "labeling.settings")
application = get_wsgi_application()

# The API checks query parameters against the OpenAPI schema, built once per process: build it
# now, while the worker starts, rather than inside its first requests.
from labeling.api.params import parameter_table  # noqa: E402  (needs the application set up)

parameter_table()

# The embedded default (tasks in-process): derived results are recomputed on a background thread
# of this process, not inside the requests that change them (labeling.in_process).
from django.conf import settings  # noqa: E402

if settings.CERTLABEL_IN_PROCESS_THREAD:
    from labeling import in_process

    in_process.start()
