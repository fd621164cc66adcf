"""gunicorn settings of the web process (``--config python:labeling.gunicorn_conf``).

gunicorn refuses a request line longer than ``limit_request_line`` (default 4094 bytes) or a
header longer than ``limit_request_field_size`` (default 8190) with its own HTML 400, before
Django runs. Raised to gunicorn's largest bounded values, so a long query string (a filter with
many values) reaches Django and is answered with the API's JSON error or the page; the proxy in
front refuses anything longer (docs/operations.md, "Request size").
"""

# gunicorn's upper bound for a bounded request line (0 would lift the limit altogether).
limit_request_line = 8190
# Twice gunicorn's default: long cookies or Authorization headers stay Django's to answer.
limit_request_field_size = 16380
