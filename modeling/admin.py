from django.contrib import admin

from .models import EmbeddingJob, ModelVersion, PretrainedModel, TrainingRun


@admin.register(TrainingRun)
class TrainingRunAdmin(admin.ModelAdmin):
    list_display = ("pk", "name", "kind", "status", "device", "epoch", "epochs", "loss", "created_at")
    list_filter = ("kind", "status")
    readonly_fields = ("history", "metrics", "log", "checkpoint", "artifact", "data_hash")


@admin.register(ModelVersion)
class ModelVersionAdmin(admin.ModelAdmin):
    list_display = ("kind", "version", "run", "active", "activated_by", "created_at")
    list_filter = ("kind", "active")
    readonly_fields = ("artifact", "artifact_sha256", "config", "metrics")


@admin.register(PretrainedModel)
class PretrainedModelAdmin(admin.ModelAdmin):
    """Read-only here: registering hashes every file and checks the architecture, so it goes through
    modeling.pack (the Model pack page, the API or ``manage.py models add-pretrained``)."""
    list_display = ("name", "kind", "architecture", "parameters", "embedding_dim", "licence", "packaged", "added_at")
    list_filter = ("kind", "packaged")
    readonly_fields = [f.name for f in PretrainedModel._meta.fields]

    def has_add_permission(self, request):
        return False


@admin.register(EmbeddingJob)
class EmbeddingJobAdmin(admin.ModelAdmin):
    list_display = ("pk", "collection", "model", "status", "done", "total", "failed", "created_at")
    list_filter = ("status",)
    readonly_fields = ("summary", "error")
