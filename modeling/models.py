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
    release = models.ForeignKey("releases.Release", null=True, blank=True, on_delete=models.PROTECT,
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
    group = models.CharField(max_length=64, blank=True, db_index=True,
                             help_text="runs of one config repeated with other seeds share a group (mean ± sd)")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True,
                                        help_text="last sign of life of the worker running it (engine/progress.py)")

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
    usable = models.BooleanField(default=True, help_text="False: trained on too little to learn; never activated")
    usable_note = models.CharField(max_length=300, blank=True)
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


class GenerationJob(models.Model):
    """Captions generated by captioner versions for a human-evaluation campaign: a Celery task (queue
    ``gpu``) with its progress here, so no web process imports torch or runs beam search."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Generating"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    name = models.CharField(max_length=200, help_text="name of the campaign to create")
    eval_kind = models.CharField(max_length=32)
    runs = models.JSONField(default=list, help_text="training run ids whose versions caption the images")
    options = models.JSONField(default=dict, blank=True, help_text="beam size, rerank by fluency ...")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    campaign = models.ForeignKey("annotation.Campaign", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"generation #{self.pk} for {self.name}"


class Sampler(models.TextChoices):
    HYBRID = "hybrid", "Hybrid: representative picks and uncertainty (default)"
    UNCERTAINTY = "uncertainty", "Uncertainty (smallest margin first)"
    RANDOM = "random", "Random"


class LearningLoop(models.Model):
    """A rating campaign whose labels train a model, run in rounds (modeling.loop): aggregate, retrain,
    compare with the active version on a hold-out, activate only if better, re-score and re-prioritise
    the open tasks with a sampler."""

    campaign = models.OneToOneField("annotation.Campaign", on_delete=models.CASCADE, related_name="learning_loop")
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.FLUENCY)
    trainer = models.CharField(max_length=40, default="fluency-encoder")
    config = models.JSONField(default=dict, blank=True, help_text="trainer config overrides")
    sampler = models.CharField(max_length=12, choices=Sampler.choices, default=Sampler.HYBRID)
    random_share = models.FloatField(default=0.3, help_text="hybrid: share of the next batch picked as representative (cluster centres), later batches at random")
    batch_size = models.PositiveIntegerField(default=40, help_text="tasks per sampler batch (a round's labels)")
    holdout_source = models.CharField(max_length=10, default="random",
                                      help_text="'gold': the campaign's gold items; 'random': a fixed random "
                                                "share of the real tasks kept out of training")
    holdout_fraction = models.FloatField(default=0.2)
    holdout_tasks = models.JSONField(default=list, blank=True, help_text="task ids of the fixed hold-out")
    min_holdout = models.PositiveIntegerField(default=20, help_text="labelled hold-out items needed to compare")
    auto_every_votes = models.PositiveIntegerField(default=0, help_text="start a round every N new votes; 0: off")
    votes_at_last_round = models.PositiveIntegerField(default=0)
    seed = models.IntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"learning loop of {self.campaign}"

    def get_absolute_url(self):
        return reverse("loop-detail", args=[self.pk])


class LoopRound(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    loop = models.ForeignKey(LearningLoop, on_delete=models.CASCADE, related_name="rounds")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    stage = models.CharField(max_length=20, blank=True, help_text="aggregating, training, evaluating, rescoring ...")
    trigger = models.CharField(max_length=10, default="manual", help_text="manual or auto")
    sampler = models.CharField(max_length=12, choices=Sampler.choices)
    labels_used = models.PositiveIntegerField(default=0)
    label_counts = models.JSONField(default=dict, blank=True)
    training_run = models.ForeignKey(TrainingRun, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="loop_rounds")
    version = models.ForeignKey(ModelVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                                help_text="the version this round trained")
    previous_version = models.ForeignKey(ModelVersion, null=True, blank=True, on_delete=models.SET_NULL,
                                         related_name="+", help_text="the version active when the round began")
    activated = models.BooleanField(default=False)
    decision = models.TextField(blank=True, help_text="why the new version was or was not activated")
    holdout = models.JSONField(default=dict, blank=True,
                               help_text="hold-out metrics of the new, the previous, the majority class, random arm")
    changes = models.JSONField(default=dict, blank=True, help_text="tasks re-scored and re-prioritised")
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["loop", "number"]
        constraints = [
            models.UniqueConstraint(fields=["loop", "number"], name="loop_round_unique_number"),
            models.UniqueConstraint(fields=["loop"], condition=Q(status__in=["queued", "running"]),
                                    name="loop_round_one_open"),
        ]

    def __str__(self):
        return f"round {self.number} of {self.loop.campaign}"

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)


class FeatureCache(models.Model):
    """Image features of a frozen release by one pretrained image encoder and one preprocessing, computed once
    (a batched task on the ``gpu`` queue) and stored as safetensors shards; every captioner run on that release
    with that encoder reads them. ``preprocessing`` is the sha256 of everything that changes the features (the
    processor's config, the image size, the feature layout): a different one is a different cache."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Computing"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    release = models.ForeignKey("releases.Release", on_delete=models.CASCADE, related_name="feature_caches")
    model = models.ForeignKey("pack.PretrainedModel", on_delete=models.CASCADE, related_name="feature_caches")
    preprocessing = models.CharField(max_length=64)
    settings = models.JSONField(default=dict, blank=True, help_text="what the preprocessing hash covers")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    shards = models.JSONField(default=list, blank=True, help_text="storage names of the safetensors shards")
    images = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    missing = models.JSONField(default=list, blank=True, help_text="image files that could not be read")
    pooled_dim = models.PositiveIntegerField(default=0)
    grid_shape = models.JSONField(default=list, blank=True, help_text="[regions, dim] of the grid features")
    device = models.CharField(max_length=40, blank=True)
    seconds = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["release", "model", "preprocessing"],
                                               name="feature_cache_unique")]
