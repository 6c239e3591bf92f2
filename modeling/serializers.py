from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from . import verdicts
from .engine.progress import worker_lost
from .groups import MAX_REPEATS
from .models import ModelVersion, TrainingRun


class VerdictSerializer(serializers.Serializer):
    """modeling.verdicts.display(): the model against every baseline on the same items, and whether the
    activation rule (``rule``) lets it be activated without force. Older majority-only verdicts read
    ``status`` "legacy"."""

    status = serializers.ChoiceField(choices=["activatable", "flagged", "legacy", "none"])
    activatable = serializers.BooleanField()
    headline = serializers.CharField(help_text='e.g. "beats majority and chance but not the length rule"')
    text = serializers.CharField()
    code = serializers.CharField(help_text="the refusal code of the first reason ('' when activatable)")
    reasons = serializers.ListField(child=serializers.DictField(), required=False)
    basis = serializers.CharField(help_text='"cv" (folds pooled), "test" (held-out split), "holdout" (a learning '
                                            'loop\'s hold-out) or "none"')
    n = serializers.IntegerField(required=False, help_text="evaluation items")
    model = serializers.FloatField(required=False, help_text="the model's macro F1")
    baselines = serializers.DictField(required=False, help_text="{name: {macro_f1, ...}} on the same items")
    best = serializers.CharField(required=False)
    difference = serializers.FloatField(required=False, help_text="model - best baseline, macro F1")
    interval = serializers.ListField(child=serializers.FloatField(), required=False, allow_null=True,
                                     help_text="paired bootstrap 95% interval of the difference")
    beats_majority = serializers.BooleanField(allow_null=True)
    margin = serializers.FloatField()


class RetrievalVerdictSerializer(serializers.Serializer):
    """captioner_judge.retrieval_verdict(): does the captioner beat nearest-neighbour retrieval on CIDEr, by a
    paired bootstrap interval over its test images that excludes zero?"""

    beats_retrieval = serializers.BooleanField(allow_null=True, help_text="null: the split is too small to judge")
    metric = serializers.CharField()
    model = serializers.FloatField(required=False)
    retrieval = serializers.FloatField(required=False)
    diff = serializers.FloatField(required=False)
    low = serializers.FloatField(required=False, allow_null=True)
    high = serializers.FloatField(required=False, allow_null=True)
    images = serializers.IntegerField(required=False)
    text = serializers.CharField()


class CaptionerJudgementMixin(serializers.Serializer):
    """A captioner's trivial captioners (most frequent caption, retrieval, source text) scored on its test split,
    its verdict against retrieval and its metrics' bootstrap intervals; null for other kinds and older runs."""

    caption_baselines = serializers.SerializerMethodField()
    retrieval_verdict = serializers.SerializerMethodField()
    intervals = serializers.SerializerMethodField()

    def get_caption_baselines(self, obj) -> dict | None:
        return (obj.metrics or {}).get("caption_baselines")

    @extend_schema_field(RetrievalVerdictSerializer(allow_null=True))
    def get_retrieval_verdict(self, obj):
        return (obj.metrics or {}).get("retrieval_verdict")

    def get_intervals(self, obj) -> dict | None:
        return (obj.metrics or {}).get("intervals")


CAPTIONER_FIELDS = ["caption_baselines", "retrieval_verdict", "intervals"]


class ModelVersionSerializer(CaptionerJudgementMixin, serializers.ModelSerializer):
    run = serializers.PrimaryKeyRelatedField(read_only=True)
    activated_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    beats_majority = serializers.SerializerMethodField(
        help_text="the verdict's comparison with the majority class alone; null: not judged")
    flagged = serializers.SerializerMethodField(help_text="true: the verdict refuses activation without force")
    verdict = serializers.SerializerMethodField()
    beats_retrieval = serializers.SerializerMethodField(
        help_text="a captioner: false when it does not beat nearest-neighbour retrieval (activating it needs force); "
                  "null: not a captioner, or not judged")
    activation_rule = serializers.SerializerMethodField()

    class Meta:
        model = ModelVersion
        fields = ["id", "kind", "version", "run", "artifact", "artifact_sha256", "config", "metrics", "active",
                  "usable", "usable_note", "activated_by", "activated_at", "created_at", "beats_majority", "flagged",
                  "verdict", "activation_rule", "beats_retrieval", *CAPTIONER_FIELDS]
        read_only_fields = fields

    def get_beats_majority(self, version) -> bool | None:
        return ((version.metrics or {}).get("verdict") or {}).get("beats_majority")

    def get_flagged(self, version) -> bool:
        return verdicts.flagged(version.metrics)

    @extend_schema_field(VerdictSerializer(allow_null=True))
    def get_verdict(self, version):
        return verdicts.display(version.metrics)

    def get_activation_rule(self, version) -> str:
        return verdicts.RULE

    def get_beats_retrieval(self, version) -> bool | None:
        return ((version.metrics or {}).get("retrieval_verdict") or {}).get("beats_retrieval")


class ActivateSerializer(serializers.Serializer):
    force = serializers.BooleanField(required=False, default=False,
                                     help_text="activate even a version the activation rule flags")


class TrainingRunSerializer(CaptionerJudgementMixin, serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    model_version = serializers.SerializerMethodField()
    worker_lost = serializers.SerializerMethodField(
        help_text="running, but its worker has not beaten for TRAINING_WORKER_LOST_AFTER_S (default 120 s): "
                  "POST .../retry/ queues it again")

    class Meta:
        model = TrainingRun
        fields = ["id", "name", "kind", "config", "release", "campaign", "data_hash", "data_summary", "status",
                  "device", "epoch", "epochs", "step", "steps_per_epoch", "loss", "samples_per_second", "history",
                  "metrics", "checkpoint", "artifact", "log", "error", "attempts", "group", "created_by", "created_at",
                  "started_at", "finished_at", "heartbeat_at", "worker_lost", "model_version", *CAPTIONER_FIELDS]
        read_only_fields = fields

    def get_model_version(self, run) -> int | None:
        version = getattr(run, "model_version", None)
        return version.pk if version else None

    def get_worker_lost(self, run) -> bool:
        return worker_lost(run)


class TrainingRunCreateSerializer(serializers.Serializer):
    trainer = serializers.CharField(max_length=100)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    config = serializers.DictField(required=False, default=dict)
    release = serializers.IntegerField(required=False, allow_null=True, default=None)
    campaign = serializers.IntegerField(required=False, allow_null=True, default=None)
    repeats = serializers.IntegerField(required=False, default=1, min_value=1, max_value=MAX_REPEATS,
                                       help_text="N runs with seeds seed, seed+1, ... in one group (mean ± sd); "
                                                 "above 1 the response is {group, runs}")


class TrainingRunGroupSerializer(serializers.Serializer):
    group = serializers.CharField()
    runs = TrainingRunSerializer(many=True)
