"""API routes of releases (included from the root urls, under /api/)."""
from django.urls import include, path
from rest_framework.routers import SimpleRouter

from . import api

router = SimpleRouter()
router.register("releases", api.ReleaseViewSet, basename="api-release")

urlpatterns = [path("", include(router.urls))]
