"""REST API routes of the labelling side."""

from django.urls import path

urlpatterns: list = []
