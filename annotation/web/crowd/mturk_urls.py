"""The MTurk ExternalQuestion page (see annotation.web.crowd.mturk)."""
from django.urls import path

from . import mturk as views

urlpatterns = [
    path("mturk/<int:campaign_id>/", views.mturk_task, name="mturk-task"),
    path("mturk/<int:campaign_id>/example.jpg", views.mturk_example_image, name="mturk-example-image"),
]
