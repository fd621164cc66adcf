"""Root URL configuration."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

# A database outage raised outside a view is a 503 (JSON under /api/); see labeling/views/errors.py.
handler500 = "labeling.views.errors.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("labeling.api.urls")),
    path("api/", include("certification.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("labeling.web_urls")),
    path("", include("certification.urls")),
]
