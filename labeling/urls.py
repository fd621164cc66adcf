"""Root URL configuration."""

from csp.decorators import csp_update
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

# Swagger UI loads its script and styles from its CDN and has a small <style> block of its own;
# its page script is served by the view itself (the split view), so no inline script runs. Only
# this page's Content-Security-Policy is relaxed, for exactly that.
SWAGGER_CDN = "https://cdn.jsdelivr.net"
api_docs = csp_update(
    {
        "script-src": [SWAGGER_CDN],
        "style-src": [SWAGGER_CDN, "'unsafe-inline'"],
        "img-src": [SWAGGER_CDN],
    }
)(SpectacularSwaggerSplitView.as_view(url_name="api-schema"))

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("labeling.api.urls")),
    path("api/", include("certification.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", api_docs, name="api-docs"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("labeling.web_urls")),
    path("", include("certification.urls")),
]
