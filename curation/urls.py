from django.urls import include, path

from . import views, views_media

urlpatterns = [
    path("collections/", views.collection_list, name="collection-list"),
    path("collections/new", views.collection_create, name="collection-create"),
    path("collections/<int:pk>/", views.collection_detail, name="collection-detail"),
    path("images/<int:pk>/", views.image_detail, name="image-detail"),
    path("imports/", views.import_list, name="import-list"),
    path("imports/new", views.import_create, name="import-create"),
    path("imports/<int:pk>/", views.import_detail, name="import-detail"),
    path("imports/<int:pk>/progress", views.import_progress, name="import-progress"),
    path("media/images/<int:pk>/file", views_media.image_file, name="image-file"),
    path("media/images/<int:pk>/thumb", views_media.image_thumbnail, name="image-thumbnail"),
    path("", include("curation.urls_pipeline")),
    path("", include("curation.urls_search")),
]
