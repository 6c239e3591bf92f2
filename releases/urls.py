"""Release pages (included from the root urls)."""
from django.urls import path

from . import views

urlpatterns = [
    path("releases/", views.release_list, name="release-list"),
    path("releases/new", views.release_create, name="release-create"),
    path("releases/<int:pk>/", views.release_detail, name="release-detail"),
    path("releases/<int:pk>/progress", views.release_progress, name="release-progress"),
    path("releases/<int:pk>/freeze", views.release_freeze, name="release-freeze"),
    path("releases/<int:pk>/exports", views.release_exports, name="release-exports"),
    path("releases/<int:pk>/exports/<int:export_id>/download", views.export_download, name="release-download"),
    path("releases/<int:pk>/exports/<int:export_id>/verify", views.export_verify, name="release-export-verify"),
    path("releases/<int:pk>/exports/<int:export_id>/delete", views.export_delete, name="release-export-delete"),
]
