"""Pages of the annotation app: the annotator's work pages and the curator's campaign pages."""
from django.urls import include, path

urlpatterns = [
    path("", include("annotation.web.annotator.urls")),
    path("", include("annotation.web.curator.urls")),
    path("", include("annotation.web.crowd.linkout_urls")),
    path("", include("annotation.web.crowd.mturk_urls")),
]
