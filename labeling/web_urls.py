"""HTML pages of the labelling side (login required; scoped by project membership)."""

from django.urls import path

from labeling import views

urlpatterns = [
    path("", views.project_list, name="project-list"),
    path("p/<slug:slug>/", views.project_detail, name="project-detail"),
    path("p/<slug:slug>/items/", views.item_browse, name="item-list"),
    path("p/<slug:slug>/items/<int:item_id>/", views.item_detail, name="item-detail"),
    path("p/<slug:slug>/import/", views.import_create, name="import-create"),
    path("p/<slug:slug>/partition/", views.partition_freeze_view, name="partition-freeze"),
]
