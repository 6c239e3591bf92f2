"""Import jobs and their reports: an ImportJob is one ingest run (a file or folder read by a Celery task,
with its two-phase progress of reading rows and downloading images), and an ImportIssue is one row of its
report that was skipped or landed with a warning."""
from django.conf import settings
from django.db import models
from django.urls import reverse

from .collection import Collection


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
