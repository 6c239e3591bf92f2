"""The Collection: a named set of images and their captions from one kind of source, in one language.
Every image, caption, import job, filter run and artifact belongs to (or points at) a collection."""
from django.conf import settings
from django.db import models
from django.urls import reverse


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
