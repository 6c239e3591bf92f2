"""Search pages and duplicate clusters (included from curation/urls.py)."""
from django.urls import path

from . import views_clusters, views_search

urlpatterns = [
    path("collections/<int:pk>/search", views_search.collection_search, name="collection-search"),
    path("captions/<int:pk>/like", views_search.caption_like, name="caption-like"),
    path("images/<int:pk>/like", views_search.image_like, name="image-like"),
    path("runs/<int:pk>/steps/<int:step>/clusters/", views_clusters.run_step_clusters, name="run-step-clusters"),
    path("runs/<int:pk>/steps/<int:step>/clusters/<int:cluster>/keep", views_clusters.cluster_keep,
         name="run-step-cluster-keep"),
]
