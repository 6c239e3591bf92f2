"""Images and captions with lineage: the Image (a verified file or a pending download, unique per
collection by hash, URL or external id), its storage naming (``image_upload_to``), the Caption (unique per
image + text + source, with a parent chain back to the raw text) and ``text_hash``, its deduplication key."""
import hashlib

from django.db import models
from django.db.models import Q
from django.urls import reverse

from .collection import Collection
from .imports import ImportJob


def text_hash(text: str) -> str:
    """The deduplication key of a caption text (captions are unique per image + text + source)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()

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
    # size:mtime_ns:ctime_ns:inode of the stored file when its bytes last hashed to sha256
    # (curation/ingest/file_stat.py): an export copies a file with the same stat without hashing it again.
    file_stat = models.CharField(max_length=100, blank=True, default="", db_default="")
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
