"""Curation data: collections, images, captions with lineage, and import jobs with their reports."""
import hashlib

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse


def text_hash(text: str) -> str:
    """The deduplication key of a caption text (captions are unique per image + text + source)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Collection(models.Model):
    class SourceKind(models.TextChoices):
        UPLOAD = "upload", "Uploaded images"
        WEB_ALT_TEXT = "alt_text", "Web images with alt-text"
        PHOTO_COMMENTS = "comments", "Photo-site comments"
        MUSEUM = "museum", "Museum descriptions"
        COCO = "coco", "COCO-style captions"
        TRANSLATED = "translated", "Machine-translated captions"
        OTHER = "other", "Other"

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    source_kind = models.CharField(max_length=20, choices=SourceKind.choices, default=SourceKind.UPLOAD)
    language = models.CharField(max_length=16, default="en", help_text="BCP-47 code of the texts")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("collection-detail", args=[self.pk])


class ImportJob(models.Model):
    """One ingest run: a file (or folder) read by a Celery task, with progress and a report."""

    class Kind(models.TextChoices):
        IMAGES = "images", "Folder or zip of images"
        TSV = "tsv", "Conceptual Captions TSV (caption, URL)"
        COCO = "coco", "COCO captions JSON"
        COMMENTS = "comments", "Comment dump (image id, comment)"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Reading rows"
        DOWNLOADING = "downloading", "Downloading images"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="imports")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    # The uploaded file in storage, or a server-side path given to a management command.
    upload = models.FileField(upload_to="imports/%Y/%m/", blank=True)
    source_path = models.CharField(max_length=1000, blank=True)
    source_name = models.CharField(max_length=300, help_text="Recorded on every caption it imports")
    options = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    # Progress: rows (or archive members) read so far, and the total when it is known.
    rows_total = models.PositiveIntegerField(null=True, blank=True)
    rows_read = models.PositiveIntegerField(default=0)
    rows_imported = models.PositiveIntegerField(default=0)
    rows_skipped = models.PositiveIntegerField(default=0)
    rows_duplicate = models.PositiveIntegerField(default=0)
    images_created = models.PositiveIntegerField(default=0)
    captions_created = models.PositiveIntegerField(default=0)
    downloads_total = models.PositiveIntegerField(default=0)
    downloads_done = models.PositiveIntegerField(default=0)
    downloads_failed = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.get_kind_display()} #{self.pk} into {self.collection}"

    def get_absolute_url(self):
        return reverse("import-detail", args=[self.pk])

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)

    @property
    def percent(self) -> int:
        """One bar for both phases: reading rows, then downloading the images they name."""
        if self.status == self.Status.DONE:
            return 100
        read = self.rows_read / self.rows_total if self.rows_total else 0.0
        if self.status in (self.Status.QUEUED, self.Status.RUNNING):
            return int(min(read, 1.0) * (50 if self.kind == self.Kind.TSV else 99))
        if self.downloads_total:
            fetched = (self.downloads_done + self.downloads_failed) / self.downloads_total
            return int(50 + 49 * min(fetched, 1.0))
        return 99


class ImportIssue(models.Model):
    """One row of an import report that did not land, or landed with a warning."""

    class Severity(models.TextChoices):
        SKIPPED = "skipped", "Skipped"
        WARNING = "warning", "Warning"

    job = models.ForeignKey(ImportJob, on_delete=models.CASCADE, related_name="issues")
    line = models.PositiveIntegerField(null=True, blank=True, help_text="1-based line or member number")
    item = models.CharField(max_length=500, blank=True, help_text="file name, URL or id of the row")
    code = models.CharField(max_length=40)
    message = models.TextField()
    severity = models.CharField(max_length=10, choices=Severity.choices, default=Severity.SKIPPED)

    class Meta:
        ordering = ["line", "pk"]
        indexes = [models.Index(fields=["job", "code"])]

    def __str__(self):
        return f"line {self.line}: {self.code}"


def image_upload_to(instance, filename):
    return f"images/{instance.sha256[:2]}/{instance.sha256}.{instance.extension}"


class Image(models.Model):
    class Status(models.TextChoices):
        READY = "ready", "Ready"
        PENDING = "pending", "Waiting for download"
        FAILED = "failed", "Download failed"
        MISSING = "missing", "No file yet"

    # Formats the platform verifies, stores and serves inline.
    # MPO is what Pillow calls a multi-picture camera JPEG: a JPEG file to every browser.
    FORMATS = {"JPEG": ("jpg", "image/jpeg"), "MPO": ("jpg", "image/jpeg"), "PNG": ("png", "image/png"),
               "WEBP": ("webp", "image/webp"), "GIF": ("gif", "image/gif"),
               "BMP": ("bmp", "image/bmp"), "TIFF": ("tif", "image/tiff")}

    # Indexed through (collection, status) and the unique constraints, which all start with it.
    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="images", db_index=False)
    file = models.FileField(upload_to=image_upload_to, max_length=300, blank=True)
    thumbnail = models.FileField(upload_to="thumbs/", max_length=300, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.READY)
    sha256 = models.CharField(max_length=64, null=True, blank=True)
    phash = models.CharField(max_length=32, blank=True)
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    format = models.CharField(max_length=10, blank=True)
    file_size = models.PositiveBigIntegerField(null=True, blank=True)
    source_url = models.TextField(blank=True)
    external_id = models.CharField(max_length=300, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    license = models.CharField(max_length=300, blank=True)
    credit = models.CharField(max_length=500, blank=True)
    error = models.TextField(blank=True)
    import_job = models.ForeignKey(ImportJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    import_line = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["collection", "sha256"], condition=Q(sha256__isnull=False), name="image_unique_sha256"
            ),
            models.UniqueConstraint(
                fields=["collection", "source_url"], condition=~Q(source_url=""), name="image_unique_source_url"
            ),
            models.UniqueConstraint(
                fields=["collection", "external_id"], condition=~Q(external_id=""), name="image_unique_external_id"
            ),
        ]
        indexes = [models.Index(fields=["collection", "status"])]

    def __str__(self):
        return self.external_id or (self.sha256 or "")[:12] or f"image {self.pk}"

    def get_absolute_url(self):
        return reverse("image-detail", args=[self.pk])

    @property
    def extension(self) -> str:
        return self.FORMATS.get(self.format, ("bin", ""))[0]

    @property
    def content_type(self) -> str:
        return self.FORMATS.get(self.format, ("bin", "application/octet-stream"))[1]


class Caption(models.Model):
    class Origin(models.TextChoices):
        ALT_TEXT = "alt_text", "Web alt-text"
        WEB_COMMENT = "web_comment", "Web comment"
        MUSEUM = "museum", "Museum description"
        DATASET = "dataset", "Existing dataset"
        CROWD = "crowd", "Crowd-written"
        TRANSLATED = "translated", "Machine-translated"
        MODEL = "model", "Model-generated"
        TRANSFORMED = "transformed", "Transformed"
        # A caption seed (seed 001 section 2) a run's caption_seeds step found in a description, as a short
        # caption ("person slays dragon"); its parent is the description (curation/pipeline/seeds.py).
        SEED = "seed", "Caption seed"

    # Indexed through the unique (image, text_hash, source) constraint, which starts with it.
    image = models.ForeignKey(Image, on_delete=models.CASCADE, related_name="captions", db_index=False)
    text = models.TextField()
    text_hash = models.CharField(max_length=64, editable=False)
    language = models.CharField(max_length=16, blank=True)
    origin = models.CharField(max_length=16, choices=Origin.choices)
    # RESTRICT: a caption with derived captions cannot be deleted alone (the lineage would break), but its
    # image or collection can, taking the whole chain with it (PROTECT refused even that).
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.RESTRICT, related_name="children")
    source = models.CharField(max_length=300, blank=True, help_text="import source (file name) or producer")
    import_job = models.ForeignKey(ImportJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    import_line = models.PositiveIntegerField(null=True, blank=True)
    external_id = models.CharField(max_length=100, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]
        constraints = [
            models.UniqueConstraint(fields=["image", "text_hash", "source"], name="caption_unique_per_source"),
        ]

    def __str__(self):
        return self.text[:80]

    def save(self, *args, **kwargs):
        self.text_hash = text_hash(self.text)
        super().save(*args, **kwargs)

    def lineage(self) -> list["Caption"]:
        """This caption and its ancestors, the raw text last."""
        chain, node, seen = [], self, set()
        while node is not None and node.pk not in seen:
            chain.append(node)
            seen.add(node.pk)
            node = node.parent
        return chain


__all__ = ["Collection", "Image", "Caption", "ImportJob", "ImportIssue", "text_hash"]


# --- Filter pipelines, runs and decisions (the curation pipeline) ------------------------------


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
    # {step: {outcome: decisions}} that the chunk wrote, saved with its being done: the run's funnel is
    # their sum (plus the run-level steps), not a count over the run's decisions (a dozen rows per caption).
    counts = models.JSONField(null=True, blank=True)

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
        # Finalising a run looks for overrides made since it was created (see executor._funnel_from_chunks).
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


# --- Releases: frozen, reproducible training sets ---------------------------------------------


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
        ordering = ["release", "format", "-created_at"]
