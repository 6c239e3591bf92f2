"""The annotator's work pages (see annotation.web.annotator.views)."""
from django.urls import path

from . import views

urlpatterns = [
    path("work/", views.work_list, name="annotate-list"),
    path("work/<int:campaign_id>/", views.work_page, name="annotate"),
    path("work/<int:campaign_id>/submit", views.work_submit, name="annotate-submit"),
    path("work/<int:campaign_id>/undo", views.work_undo, name="annotate-undo"),
    path("work/<int:campaign_id>/skip", views.work_skip, name="annotate-skip"),
]
