from django.urls import include, path
from rest_framework.routers import DefaultRouter

from . import api, api_pipeline

router = DefaultRouter()
router.register("collections", api.CollectionViewSet, basename="api-collection")
router.register("images", api.ImageViewSet, basename="api-image")
router.register("captions", api.CaptionViewSet, basename="api-caption")
router.register("imports", api.ImportJobViewSet, basename="api-import")
router.register("pipelines", api_pipeline.PipelineViewSet, basename="api-pipeline")
router.register("runs", api_pipeline.FilterRunViewSet, basename="api-run")
router.register("decisions", api_pipeline.DecisionViewSet, basename="api-decision")

urlpatterns = [
    path("", include("curation.api_search")),
    path("", include(router.urls)),
    path("auth/token/", api.ObtainTokenView.as_view(), name="api-token"),
]
