"""The application's URLs plus one page that raises, to see the 500 page (``test_error_pages``)."""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from labeling.urls import handler500
from labeling.urls import urlpatterns as app_urlpatterns

__all__ = ["handler500", "urlpatterns"]


def broken_page(request: HttpRequest) -> HttpResponse:
    """Fail as an unexpected bug would."""
    raise RuntimeError("a bug in a page")


urlpatterns = [
    path("test-broken-page/", broken_page),
    path("api/test-broken-endpoint/", broken_page),
    *app_urlpatterns,
]
