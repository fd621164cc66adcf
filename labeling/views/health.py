"""Health endpoints for load balancers, process supervisors and Kubernetes probes.

- ``GET /health/live``: the process is up and serving; 200 ``{"status": "ok"}``, touching
  neither the database nor the cache.
- ``GET /health/ready``: the process can serve requests; 200 when every required check of
  ``labeling.health`` passed, else 503, with each check's outcome::

      {"status": "ok" | "unavailable",
       "checks": {"database": {"ok": true, "error": null, "ms": 2}, "cache": {...}, ...}}

Both answer anyone (no login, no session, no CSRF, no throttle: they are not DRF views) and
are never cached. GET and HEAD only.
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from labeling.health import is_ready, readiness_checks


@csrf_exempt
@never_cache
@require_safe
def live(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@csrf_exempt
@never_cache
@require_safe
def ready(request: HttpRequest) -> JsonResponse:
    results = readiness_checks()
    ok = is_ready(results)
    body = {
        "status": "ok" if ok else "unavailable",
        "checks": {r.name: {"ok": r.ok, "error": r.error, "ms": r.ms} for r in results},
    }
    return JsonResponse(body, status=200 if ok else 503)
