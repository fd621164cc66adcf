"""WSGI entry point."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "labeling.settings")
application = get_wsgi_application()

# The API checks query parameters against the OpenAPI schema, built once per process: build it
# now, while the worker starts, rather than inside its first requests.
from labeling.api.params import parameter_table  # noqa: E402  (needs the application set up)

parameter_table()
