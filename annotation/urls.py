"""Pages of the annotation app: the annotator's work pages and the curator's campaign pages."""
from django.urls import include, path

urlpatterns = [
    path("", include("annotation.urls_annotate")),
    path("", include("annotation.urls_campaigns")),
    path("", include("annotation.urls_linkout")),
    path("", include("annotation.urls_mturk")),
]
