"""The models: training runs and the model registry.

A TrainingRun is one Celery job on the ``gpu`` queue (CPU where the worker has no GPU): its config,
the data it trained on with that data's hash, the device, live progress, checkpoints in storage
(one per epoch, so a killed worker resumes), metrics, a log and the final artifact. A finished run
registers a ModelVersion; one active version per kind is what filters and campaigns use.
"""
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse


class Kind(models.TextChoices):
    FLUENCY = "fluency", "Fluency classifier"
    CAPTIONER = "captioner", "Captioner"
    TOPIC_CNN = "topic_cnn", "Topic CNN (LDA weak supervision)"


class TrainingRun(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Training"
        EVALUATING = "evaluating", "Evaluating"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    name = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=12, choices=Kind.choices)
    config = models.JSONField(default=dict, help_text="hyper-parameters, strategy, seed, device request")
    release = models.ForeignKey("curation.Release", null=True, blank=True, on_delete=models.PROTECT,
                                related_name="training_runs")
    campaign = models.ForeignKey("annotation.Campaign", null=True, blank=True, on_delete=models.PROTECT,
                                 related_name="training_runs", help_text="labels from its aggregated votes")
    data_hash = models.CharField(max_length=64, blank=True, help_text="sha256 of the training data as read")
    data_summary = models.JSONField(default=dict, blank=True, help_text="counts per split, label balance")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    device = models.CharField(max_length=40, blank=True, help_text="cpu, cuda:0 (name)")
    epoch = models.PositiveIntegerField(default=0)
    epochs = models.PositiveIntegerField(default=0)
    step = models.PositiveIntegerField(default=0)
    steps_per_epoch = models.PositiveIntegerField(default=0)
    loss = models.FloatField(null=True, blank=True)
    samples_per_second = models.FloatField(null=True, blank=True)
    history = models.JSONField(default=list, blank=True, help_text="[{epoch, step, loss, val_loss, samples_per_s}]")
    metrics = models.JSONField(default=dict, blank=True)
    checkpoint = models.CharField(max_length=300, blank=True, help_text="storage name of the last checkpoint")
    artifact = models.CharField(max_length=300, blank=True, help_text="storage name of the final weights")
    log = models.TextField(blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.name or f"{self.get_kind_display()} run #{self.pk}"

    def get_absolute_url(self):
        return reverse("training-run-detail", args=[self.pk])

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED, self.Status.CANCELLED)


class ModelVersion(models.Model):
    kind = models.CharField(max_length=12, choices=Kind.choices)
    version = models.PositiveIntegerField(help_text="1, 2, ... per kind")
    run = models.OneToOneField(TrainingRun, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="model_version")
    artifact = models.CharField(max_length=300, help_text="storage name of the weights (state dict)")
    artifact_sha256 = models.CharField(max_length=64)
    config = models.JSONField(default=dict, help_text="what is needed to rebuild the model: sizes, vocabularies")
    metrics = models.JSONField(default=dict, blank=True)
    active = models.BooleanField(default=False)
    activated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+")
    activated_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["kind", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["kind", "version"], name="model_version_unique"),
            models.UniqueConstraint(fields=["kind"], condition=Q(active=True), name="model_version_one_active"),
        ]

    def __str__(self):
        return f"{self.get_kind_display()} v{self.version}"
