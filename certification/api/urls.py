"""REST API routes of the certification side, under /api/ beside the labelling routes."""

from django.urls import path

from certification.api import views

urlpatterns = [
    path(
        "projects/<slug:slug>/agreement/",
        views.AgreementReportApi.as_view(),
        name="api-agreement",
    ),
]
