"""The curation pipeline: filter Pipelines (ordered steps with parameters), fitted FilterArtifacts,
FilterRuns split into RunChunks, the FilterDecisions they write (with ``cascade_image_level``, their
image's on_delete, and ``decisions_of_images``, the indexed query for an image's decisions), curators'
Reviews (overrides), and what runs extract: CaptionSeeds and ImageTopics."""
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse

from .collection import Collection
from .images import Caption, Image


class Pipeline(models.Model):
    """An ordered list of filter steps with parameters: ``steps = [{"filter": name, "params": {...}}]``."""

    class Target(models.TextChoices):
        CAPTIONS = "captions", "Captions (with their images)"
        IMAGES = "images", "Images"

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    preset = models.CharField(max_length=50, blank=True, help_text="seed preset this pipeline was made from")
    steps = models.JSONField(default=list)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("pipeline-detail", args=[self.pk])


class FilterArtifact(models.Model):
    """Fitted state of a filter (corpus statistics, topic models), versioned and reusable."""

    filter_name = models.CharField(max_length=60)
    version = models.PositiveIntegerField()
    collection = models.ForeignKey(Collection, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    params = models.JSONField(default=dict, blank=True)
    data = models.FileField(upload_to="artifacts/", max_length=300)
    sha256 = models.CharField(max_length=64)
    summary = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["filter_name", "-version"]
        constraints = [models.UniqueConstraint(fields=["filter_name", "version"], name="artifact_unique_version")]

    def __str__(self):
        return f"{self.filter_name} v{self.version}"


class FilterRun(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        FITTING = "fitting", "Fitting corpus statistics"
        RUNNING = "running", "Running"
        FINALISING = "finalising", "Run-level filters"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="filter_runs")
    pipeline = models.ForeignKey(Pipeline, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    snapshot = models.JSONField(default=list, help_text="the steps as run: filter, version, params")
    versions = models.JSONField(default=dict, help_text="library and model versions used")
    artifacts = models.JSONField(default=dict, blank=True, help_text="fitted artifact ids by step")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.QUEUED)
    items_total = models.PositiveIntegerField(default=0)
    items_done = models.PositiveIntegerField(default=0)
    chunks_total = models.PositiveIntegerField(default=0)
    chunks_done = models.PositiveIntegerField(default=0)
    chunks_failed = models.PositiveIntegerField(default=0)
    funnel = models.JSONField(default=list, blank=True, help_text="per step: entered, kept, dropped, n/a")
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"run #{self.pk} of {self.pipeline or 'a pipeline'} on {self.collection}"

    def get_absolute_url(self):
        return reverse("run-detail", args=[self.pk])

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)

    @property
    def percent(self) -> int:
        if self.status == self.Status.DONE:
            return 100
        if not self.chunks_total:
            return 0
        return int(99 * (self.chunks_done + self.chunks_failed) / self.chunks_total)


class RunChunk(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    run = models.ForeignKey(FilterRun, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    item_ids = models.JSONField(default=list)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    seconds = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="chunk_unique_index")]


def cascade_image_level(collector, field, sub_objs, using):
    """``on_delete`` of a decision's image: deletes the image's own decisions (no caption), found by the
    partial index on image-level rows. Its captions' decisions go with its captions (Caption.image
    cascades, and a decision's caption is a caption of its image): the decisions table keeps no index on
    image_id over all rows, which every caption's dozen rows would pay for on insertion."""
    models.CASCADE(collector, field, sub_objs.filter(caption__isnull=True), using)


cascade_image_level.lazy_sub_objs = True  # the collector must not read every decision by image_id first


class FilterDecision(models.Model):
    class Outcome(models.TextChoices):
        KEEP = "keep", "Keep"
        DROP = "drop", "Drop"
        NOT_APPLICABLE = "na", "Not applicable"

    # A run writes (steps x items) decisions, a dozen per caption: the table's foreign keys are kept by
    # Django (deletes cascade through the ORM's collector) rather than by PostgreSQL, whose per-row
    # referential-integrity triggers cost more than the insert itself (three lookups per row; see
    # benchmarks/filters.py). Decisions are only written by the executor, for rows it has just read.
    run = models.ForeignKey(FilterRun, on_delete=models.CASCADE, related_name="decisions", db_index=False,
                            db_constraint=False)
    step = models.PositiveSmallIntegerField(help_text="position of the filter in the run's snapshot")
    filter_name = models.CharField(max_length=60)
    image = models.ForeignKey(Image, on_delete=cascade_image_level, related_name="+", db_constraint=False,
                              db_index=False)
    caption = models.ForeignKey(Caption, null=True, blank=True, on_delete=models.CASCADE, related_name="+",
                                db_constraint=False)
    outcome = models.CharField(max_length=4, choices=Outcome.choices)
    score = models.FloatField(null=True, blank=True)
    reason = models.CharField(max_length=60, blank=True)
    details = models.JSONField(default=dict, blank=True)
    text_before = models.TextField(blank=True)
    text_after = models.TextField(blank=True)
    # The latest curator override ("" when none); the history is in Review.
    override = models.CharField(max_length=4, choices=Outcome.choices, blank=True)

    @property
    def final_outcome(self) -> str:
        return self.override or self.outcome

    @staticmethod
    def final_is(outcome: str) -> Q:
        """Decisions whose final outcome (the curator's override, else the filter's) is ``outcome``."""
        return Q(override=outcome) | (Q(override="") & Q(outcome=outcome))

    class Meta:
        ordering = ["run", "step", "pk"]
        # Every index costs each of a run's rows an insertion, on the PostgreSQL backend that shares the
        # workers' cores (benchmarks/filters.py prints the backends' CPU). (run, step, caption) holds every
        # row (an image's own decisions under a NULL caption, which unique constraints treat as distinct):
        # it keeps a caption's decision unique and serves each query by run or by run and step (a step's
        # pages, deleting a run). caption_id has its foreign key's index. Image-level rows, a few per
        # image, are kept unique by a partial index and found by image through another; a caption's
        # rows are found by image through its captions (decisions_of_images). Dropped, as measured on
        # 235,000 rows: an index on (run, step, outcome, reason), a quarter of the backend's time per row,
        # which served nothing the first does not (the pages filter on the final outcome, override
        # included), and the full image_id index, an eighth.
        indexes = [models.Index(fields=["image"], condition=Q(caption__isnull=True), name="decision_image_level")]
        constraints = [
            models.UniqueConstraint(fields=["run", "step", "caption"], name="decision_unique_caption"),
            models.UniqueConstraint(fields=["run", "step", "image"], condition=Q(caption__isnull=True),
                                    name="decision_unique_image"),
        ]


def decisions_of_images(image_ids, caption_ids=None):
    """A Q for the decisions about these images: their own (no caption) and their captions' (a
    decision's caption is a caption of its image), each arm through an index of its own (PostgreSQL
    ORs two bitmap scans). ``caption_ids``: the images' captions where the caller has read them."""
    image_ids = list(image_ids)
    if caption_ids is None:
        caption_ids = Caption.objects.filter(image_id__in=image_ids).values_list("pk", flat=True)
    return Q(caption__isnull=True, image_id__in=image_ids) | Q(caption_id__in=list(caption_ids))


class Review(models.Model):
    """A curator's override of a decision."""

    decision = models.ForeignKey(FilterDecision, on_delete=models.CASCADE, related_name="reviews")
    outcome = models.CharField(max_length=4, choices=FilterDecision.Outcome.choices)
    note = models.TextField(blank=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        # Reviews by date (an index kept from when finalising a run looked for overrides made since it was created).
        indexes = [models.Index(fields=["created_at"], name="review_created_idx")]


class CaptionSeed(models.Model):
    """A subject-relation-object seed extracted from a description (seed 001)."""

    caption = models.ForeignKey(Caption, on_delete=models.CASCADE, related_name="seeds")
    run = models.ForeignKey(FilterRun, null=True, blank=True, on_delete=models.CASCADE, related_name="seeds")
    subject = models.CharField(max_length=200)
    relation = models.CharField(max_length=200)
    object = models.CharField(max_length=200, blank=True)
    sentence = models.TextField()

    class Meta:
        ordering = ["caption", "pk"]
        constraints = [models.UniqueConstraint(fields=["caption", "run", "subject", "relation", "object"],
                                               name="seed_unique")]

    def __str__(self):
        return "_".join(p for p in (self.subject, self.relation, self.object) if p)


class ImageTopics(models.Model):
    """An image's LDA topic distribution (seed 000, Section 4): the CNN's soft label."""

    image = models.ForeignKey(Image, on_delete=models.CASCADE, related_name="topics")
    artifact = models.ForeignKey(FilterArtifact, on_delete=models.CASCADE, related_name="+")
    distribution = models.JSONField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["image", "artifact"], name="topics_unique")]
