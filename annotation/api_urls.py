"""API routes of crowd campaigns: the curator's and annotator's endpoints (``api``) and the hot
path, fetch next task and submit a vote (``api_hot``)."""
from django.urls import include, path
from rest_framework.routers import SimpleRouter

from . import api

# SimpleRouter: the API root view is curation's DefaultRouter's; a second one would shadow nothing
# but duplicate the "api-root" name.
router = SimpleRouter()
router.register("campaigns", api.CampaignViewSet, basename="api-campaign")

urlpatterns = [
    path("", include("annotation.api_hot")),
    path("", include("annotation.api_results")),
    path("", include("annotation.api_verify")),
    path("", include(router.urls)),
]
