"""Curator pages of the curation pipeline (included from curation/urls.py)."""
from django.urls import path

from . import views_pipeline as views

urlpatterns = [
    path("pipelines/", views.pipeline_list, name="pipeline-list"),
    path("pipelines/<int:pk>/", views.pipeline_detail, name="pipeline-detail"),
    path("pipelines/<int:pk>/run", views.pipeline_run, name="pipeline-run"),
    path("runs/", views.run_list, name="run-list"),
    path("runs/<int:pk>/", views.run_detail, name="run-detail"),
    path("runs/<int:pk>/progress", views.run_progress, name="run-progress"),
    path("runs/<int:pk>/steps/<int:step>/", views.run_step, name="run-step"),
    path("runs/<int:pk>/steps/<int:step>/histogram", views.run_step_histogram, name="run-step-histogram"),
    path("runs/<int:pk>/steps/<int:step>/overrides", views.step_overrides, name="run-step-overrides"),
    path("decisions/<int:pk>/override", views.decision_override, name="decision-override"),
]
