"""REST API routes of the labelling side (token or session auth; see labeling/api/views.py)."""

from django.urls import path

from labeling.api import views

urlpatterns = [
    path("projects/", views.ProjectListApi.as_view(), name="api-project-list"),
    path("projects/<slug:slug>/", views.ProjectDetailApi.as_view(), name="api-project-detail"),
    path("projects/<slug:slug>/items/", views.ItemListApi.as_view(), name="api-item-list"),
    path(
        "projects/<slug:slug>/items/<int:item_id>/",
        views.ItemDetailApi.as_view(),
        name="api-item-detail",
    ),
    path(
        "projects/<slug:slug>/imports/",
        views.ImportCreateApi.as_view(),
        name="api-import-create",
    ),
    path(
        "projects/<slug:slug>/partition/",
        views.PartitionFreezeApi.as_view(),
        name="api-partition-freeze",
    ),
]
