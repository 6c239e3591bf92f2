"""Releases: frozen, reproducible training sets. A Release holds what was asked for and the freezing
report, its ReleaseItem rows what was frozen (caption text and image facts copied, so later edits never
change it), and each ReleaseExport one written format of it (COCO, Karpathy, JSONL, CSV, Parquet,
WebDataset).

The tables keep the names they had when these models lived in the curation app (``curation_release``...):
the move (migrations ``releases.0001_initial`` and ``curation.0014_move_releases_out``) changed Django's state only."""
from django.conf import settings
from django.db import models
from django.urls import reverse

from curation.models import Caption, Image


class Release(models.Model):
    """A frozen selection. ``config`` says what was asked for; the ReleaseItem rows hold what was
    frozen (text and image facts copied), so later edits to captions or images never change it."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        FREEZING = "freezing", "Freezing"
        FROZEN = "frozen", "Frozen"
        FAILED = "failed", "Failed"

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    config = models.JSONField(default=dict, help_text="selection, vote rules, caps, dedup, splits, seed")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    items_total = models.PositiveIntegerField(default=0)
    items_done = models.PositiveIntegerField(default=0)
    counts = models.JSONField(default=dict, blank=True, help_text="images and captions per split")
    report = models.JSONField(default=list, blank=True, help_text="what was left out, and why")
    content_hash = models.CharField(max_length=64, blank=True, help_text="sha256 of the canonical manifest")
    card = models.TextField(blank=True, help_text="the dataset card (Markdown)")
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    frozen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "curation_release"
        ordering = ["-created_at"]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("release-detail", args=[self.pk])

    @property
    def frozen(self) -> bool:
        return self.status == self.Status.FROZEN


class ReleaseItem(models.Model):
    """One caption of a release, with the facts of its image copied at freezing time."""

    class Split(models.TextChoices):
        TRAIN = "train", "Train"
        VAL = "val", "Validation"
        TEST = "test", "Test"

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="items", db_index=False)
    position = models.PositiveIntegerField(help_text="stable order of the release's rows")
    split = models.CharField(max_length=5, choices=Split.choices)
    image = models.ForeignKey(Image, null=True, on_delete=models.SET_NULL, related_name="+", db_index=False)
    image_sha256 = models.CharField(max_length=64)
    image_file = models.CharField(max_length=300, help_text="storage name of the image file")
    image_format = models.CharField(max_length=10, blank=True)
    width = models.PositiveIntegerField(null=True)
    height = models.PositiveIntegerField(null=True)
    license = models.CharField(max_length=300, blank=True)
    credit = models.CharField(max_length=500, blank=True)
    external_id = models.CharField(max_length=300, blank=True)
    caption = models.ForeignKey(Caption, null=True, on_delete=models.SET_NULL, related_name="+", db_index=False)
    text = models.TextField()
    language = models.CharField(max_length=16, blank=True)
    human_verified = models.BooleanField(default=False)
    provenance = models.JSONField(default=dict, help_text="lineage, decisions, overrides, votes, model versions")

    class Meta:
        db_table = "curation_releaseitem"
        ordering = ["release", "position"]
        constraints = [models.UniqueConstraint(fields=["release", "position"], name="release_item_position")]
        indexes = [models.Index(fields=["release", "split", "position"])]


class ReleaseExport(models.Model):
    """One format of a release, written by a Celery task and published only when complete."""

    class Format(models.TextChoices):
        COCO = "coco", "COCO captions JSON"
        KARPATHY = "karpathy", "Karpathy-split JSON (dataset_coco.json)"
        JSONL = "jsonl", "JSON Lines"
        CSV = "csv", "CSV"
        PARQUET = "parquet", "Parquet (Hugging Face datasets)"
        WEBDATASET = "webdataset", "WebDataset tar shards"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Writing"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="exports")
    format = models.CharField(max_length=12, choices=Format.choices)
    options = models.JSONField(default=dict, blank=True, help_text="e.g. shard_size for WebDataset")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    rows_total = models.PositiveIntegerField(default=0)
    rows_done = models.PositiveIntegerField(default=0)
    files = models.JSONField(default=list, blank=True, help_text="[{name, size, sha256}] in storage")
    sha256 = models.CharField(max_length=64, blank=True, help_text="of the file, or of the shard list")
    size = models.PositiveBigIntegerField(default=0)
    report = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    verification = models.JSONField(default=dict, blank=True,
                                    help_text="the last re-export and verify: {status, ok, files: [{name, recorded, "
                                              "rewritten, stored, match}], started_at, finished_at, error}")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "curation_releaseexport"
        ordering = ["release", "format", "-created_at"]
