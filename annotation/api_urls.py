"""API routes of crowd campaigns: the curator's and annotator's endpoints (``web.curator.api``,
``api_results``, ``api_verify``) and the hot path, fetch next task and submit a vote (``web.annotator.api``)."""
from django.urls import include, path
from rest_framework.routers import SimpleRouter

from .web.curator import api

# SimpleRouter: the API root view is curation's DefaultRouter's; a second one would shadow nothing
# but duplicate the "api-root" name.
router = SimpleRouter()
router.register("campaigns", api.CampaignViewSet, basename="api-campaign")

urlpatterns = [
    path("", include("annotation.web.annotator.api")),
    path("", include("annotation.web.curator.api_results")),
    path("", include("annotation.web.curator.api_verify")),
    path("", include("annotation.web.curator.api_pairs")),
    path("", include(router.urls)),
]
