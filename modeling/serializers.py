from rest_framework import serializers

from .models import ModelVersion, TrainingRun


class ModelVersionSerializer(serializers.ModelSerializer):
    run = serializers.PrimaryKeyRelatedField(read_only=True)
    activated_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = ModelVersion
        fields = ["id", "kind", "version", "run", "artifact", "artifact_sha256", "config", "metrics", "active",
                  "activated_by", "activated_at", "created_at"]
        read_only_fields = fields


class TrainingRunSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    model_version = serializers.SerializerMethodField()

    class Meta:
        model = TrainingRun
        fields = ["id", "name", "kind", "config", "release", "campaign", "data_hash", "data_summary", "status",
                  "device", "epoch", "epochs", "step", "steps_per_epoch", "loss", "samples_per_second", "history",
                  "metrics", "checkpoint", "artifact", "log", "error", "attempts", "created_by", "created_at",
                  "started_at", "finished_at", "model_version"]
        read_only_fields = fields

    def get_model_version(self, run) -> int | None:
        version = getattr(run, "model_version", None)
        return version.pk if version else None


class TrainingRunCreateSerializer(serializers.Serializer):
    trainer = serializers.CharField(max_length=100)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    config = serializers.DictField(required=False, default=dict)
    release = serializers.IntegerField(required=False, allow_null=True, default=None)
    campaign = serializers.IntegerField(required=False, allow_null=True, default=None)
