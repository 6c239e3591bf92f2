from django.contrib import admin

from .models import ModelVersion, TrainingRun


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
