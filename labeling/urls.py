"""Root URL configuration."""

from csp.decorators import csp_update
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularRedocView,
    SpectacularSwaggerSplitView,
)

from labeling.views import health, sso
from labeling.views.members import PasswordResetView

# Swagger UI is served from this site's static files (drf-spectacular-sidecar), never a CDN; its
# page script is served by the view itself (the split view), so no inline script runs. Swagger
# UI sets a small <style> block of its own, so only this page's policy allows inline styles.
api_docs = csp_update({"style-src": ["'unsafe-inline'"]})(
    # GET only: the split view has no OPTIONS page of its own (it answered 500).
    SpectacularSwaggerSplitView.as_view(url_name="api-schema", http_method_names=["get", "head"])
)
# Redoc, from the sidecar's bundle too, in a page of this site's own (templates/api/redoc.html:
# no web fonts, no inline script). Redoc injects its styles and runs its search in a worker
# it creates from a blob: URL, so only this page allows inline styles and blob: workers.
api_redoc = csp_update({"style-src": ["'unsafe-inline'"], "worker-src": ["'self'", "blob:"]})(
    SpectacularRedocView.as_view(url_name="api-schema", template_name="api/redoc.html")
)

# A database outage raised outside a view is a 503 (JSON under /api/); see labeling/views/errors.py.
handler500 = "labeling.views.errors.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    # Probes of load balancers and supervisors: no login, no session, no throttle
    # (labeling/views/health.py).
    path("health/live", health.live, name="health-live"),
    path("health/ready", health.ready, name="health-ready"),
    path("api/", include("labeling.api.urls")),
    path("api/", include("certification.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", api_docs, name="api-docs"),
    path("api/redoc/", api_redoc, name="api-redoc"),
    # "Forgot password" that says when its e-mail could not be sent (before Django's own)
    path("accounts/password_reset/", PasswordResetView.as_view(), name="password_reset"),
    path("accounts/logout/", sso.logout_view, name="logout"),
    path("accounts/sso/login/", sso.sso_login, name="sso-login"),
    path("accounts/sso/callback/", sso.sso_callback, name="sso-callback"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("labeling.web_urls")),
    path("", include("certification.urls")),
]
