from django.urls import path

from . import views, views_generation, views_groups, views_loop

urlpatterns = [
    path("models/", views.version_list, name="model-list"),
    path("models/versions/<int:pk>/activate/", views.version_activate, name="model-activate"),
    path("models/runs/", views.run_list, name="training-run-list"),
    path("models/runs/new/", views.run_create, name="training-run-create"),
    path("models/runs/<int:pk>/", views.run_detail, name="training-run-detail"),
    path("models/runs/<int:pk>/progress/", views.run_progress, name="training-run-progress"),
    path("models/runs/<int:pk>/log/", views.run_log, name="training-run-log"),
    path("models/groups/<str:group>/", views_groups.group_detail, name="training-group-detail"),
    path("models/runs/<int:pk>/cancel/", views.run_cancel, name="training-run-cancel"),
    path("models/runs/<int:pk>/retry/", views.run_retry, name="training-run-retry"),
    path("models/compare/", views.compare, name="training-compare"),
    path("models/compare/evaluate/", views_generation.evaluation_campaign, name="training-evaluation-campaign"),
    path("models/generation/<int:pk>/", views_generation.job_detail, name="generation-job-detail"),
    path("models/loops/", views_loop.loop_list, name="loop-list"),
    path("models/loops/new/", views_loop.loop_create, name="loop-create"),
    path("models/loops/<int:pk>/", views_loop.loop_detail, name="loop-detail"),
    path("models/loops/<int:pk>/live/", views_loop.loop_live, name="loop-live"),
    path("models/loops/<int:pk>/next-round/", views_loop.loop_next_round, name="loop-next-round"),
    path("models/loops/<int:pk>/settings/", views_loop.loop_settings, name="loop-settings"),
]
