from django.contrib import admin

from .models import EmbeddingJob, PretrainedModel


@admin.register(PretrainedModel)
class PretrainedModelAdmin(admin.ModelAdmin):
    """Read-only here: registering hashes every file and checks the architecture, so it goes through
    pack.catalogue (the Model pack page, the API or ``manage.py models add-pretrained``)."""
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
