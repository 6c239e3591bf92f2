"""JSON API of the model pack: registered pretrained models (list, retrieve, register, re-check the files) and
embedding jobs (start one for a collection, follow its progress).

Curators read and start jobs; registering a directory (a path on the server) is for admins. A PackError becomes
{"detail", "code", "field"?}: 400, or 409 for a duplicate name; never a 500.
"""
from django.urls import include, path
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, NotFound, PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter

import pack
from captionlab.roles import IsCurator, has_role
from curation.models import Collection

from .embeddings import jobs
from .models import EmbeddingJob, PretrainedModel


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "duplicate"


def pack_error(exc: pack.PackError) -> APIException:
    body = {"detail": exc.message, "code": exc.code}
    if exc.field:
        body["field"] = exc.field
    return Conflict(body) if exc.code == "duplicate" else ValidationError(body)


class PretrainedModelSerializer(serializers.ModelSerializer):
    key = serializers.CharField(read_only=True, help_text="name@version: what decisions and releases record")
    added_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = PretrainedModel
        fields = ["id", "name", "key", "kind", "architecture", "directory", "files", "weights_sha256", "parameters",
                  "embedding_dim", "licence", "source", "packaged", "added_by", "added_at"]
        read_only_fields = fields


class RegisterSerializer(serializers.Serializer):
    directory = serializers.CharField(max_length=1000, help_text="under CAPTIONLAB_MODELS_DIR, or absolute")
    name = serializers.CharField(max_length=80)
    licence = serializers.CharField(max_length=300)
    source = serializers.CharField(max_length=2000, required=False, allow_blank=True)


class EmbeddingJobSerializer(serializers.ModelSerializer):
    model_key = serializers.CharField(source="model.key", read_only=True)
    percent = serializers.SerializerMethodField()

    class Meta:
        model = EmbeddingJob
        fields = ["id", "collection", "model", "model_key", "status", "stage", "total", "done", "failed", "percent",
                  "device", "summary", "error", "created_at", "started_at", "heartbeat_at", "finished_at"]
        read_only_fields = fields

    def get_percent(self, job) -> int:
        return jobs.percent(job)


class EmbedSerializer(serializers.Serializer):
    collection = serializers.IntegerField()
    model = serializers.CharField(max_length=80, required=False, allow_blank=True,
                                  help_text="a registered model's name; blank: the default image-text model")


class PretrainedModelViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Registered pretrained models. POST registers a directory (admins); ``verify`` re-checks every file."""
    permission_classes = [IsCurator]
    serializer_class = PretrainedModelSerializer

    def get_queryset(self):
        return PretrainedModel.objects.select_related("added_by").order_by("kind", "name")

    def list(self, request, *args, **kwargs):
        pack.ensure_packaged()  # here, not in get_queryset: the schema generator calls that without a database
        return super().list(request, *args, **kwargs)

    @extend_schema(request=RegisterSerializer, responses={201: PretrainedModelSerializer})
    def create(self, request, *args, **kwargs):
        if not (request.user.is_superuser or has_role(request.user, "admin")):
            raise PermissionDenied("Only admins register model directories.")
        serializer = RegisterSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            model = pack.model_add_pretrained(user=request.user, **serializer.validated_data)
        except pack.PackError as exc:
            raise pack_error(exc) from None
        return Response(PretrainedModelSerializer(model).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: dict})
    @action(detail=True, methods=["post"])
    def verify(self, request, pk=None):
        """{"ok": true} when every file matches its sha256; 400 with the file at fault otherwise."""
        model = self.get_object()
        try:
            pack.verify(model)
        except pack.PackError as exc:
            raise pack_error(exc) from None
        return Response({"ok": True, "files": len(model.files), "key": model.key})


class EmbeddingJobViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Embedding jobs: POST {"collection", "model"?} queues one on the gpu queue (or returns the one already
    queued or running for that collection and model); GET follows its progress."""
    permission_classes = [IsCurator]
    serializer_class = EmbeddingJobSerializer

    def get_queryset(self):
        return EmbeddingJob.objects.select_related("model").order_by("-pk")

    @extend_schema(request=EmbedSerializer, responses={201: EmbeddingJobSerializer})
    def create(self, request, *args, **kwargs):
        serializer = EmbedSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        collection = Collection.objects.filter(pk=serializer.validated_data["collection"]).first()
        if collection is None:
            raise NotFound({"detail": f"No collection #{serializer.validated_data['collection']}.",
                            "code": "no_collection", "field": "collection"})
        try:
            job = jobs.job_create(collection=collection, model=serializer.validated_data.get("model") or None,
                                  user=request.user)
        except pack.PackError as exc:
            raise pack_error(exc) from None
        if job.status == EmbeddingJob.Status.QUEUED and job.started_at is None:
            jobs.job_enqueue(job)
        return Response(EmbeddingJobSerializer(job).data, status=status.HTTP_201_CREATED)


router = SimpleRouter()
router.register("pretrained-models", PretrainedModelViewSet, basename="api-pretrained-model")
router.register("embedding-jobs", EmbeddingJobViewSet, basename="api-embedding-job")
urlpatterns = [path("", include(router.urls))]
