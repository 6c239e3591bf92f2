from django.urls import path

from . import views

urlpatterns = [
    path("models/", views.version_list, name="model-list"),
    path("models/versions/<int:pk>/activate/", views.version_activate, name="model-activate"),
    path("models/runs/", views.run_list, name="training-run-list"),
    path("models/runs/new/", views.run_create, name="training-run-create"),
    path("models/runs/<int:pk>/", views.run_detail, name="training-run-detail"),
    path("models/runs/<int:pk>/progress/", views.run_progress, name="training-run-progress"),
    path("models/runs/<int:pk>/cancel/", views.run_cancel, name="training-run-cancel"),
    path("models/runs/<int:pk>/retry/", views.run_retry, name="training-run-retry"),
    path("models/compare/", views.compare, name="training-compare"),
    path("models/compare/evaluate/", views.evaluation_campaign, name="training-evaluation-campaign"),
]
