from django.urls import path

from . import views

urlpatterns = [
    path("models/pretrained/", views.pretrained_list, name="pretrained-list"),
    path("models/pretrained/<int:pk>/", views.pretrained_detail, name="pretrained-detail"),
    path("models/embeddings/<int:pk>/", views.embedding_job_detail, name="embedding-job-detail"),
    path("collections/<int:pk>/embed", views.collection_embed, name="collection-embed"),
]
