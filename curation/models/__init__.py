"""Curation data: collections, images, captions with lineage, and import jobs with their reports.

The models live in modules by domain and are all imported here, in their original order, so that Django's
app registry (this package is still the ``curation`` app's models module) and every
``from curation.models import X`` keep working: ``collection`` (Collection), ``imports`` (ImportJob,
ImportIssue), ``images`` (Image, Caption, ``text_hash``, ``image_upload_to``), ``pipeline`` (pipelines,
runs, chunks, decisions, reviews, artifacts, seeds, topics). Releases are the ``releases`` app's (``releases.models``).
Migrations refer to ``curation.models.image_upload_to`` and ``curation.models.cascade_image_level``.
"""
from .collection import Collection
from .images import Caption, Image, image_upload_to, text_hash
from .imports import ImportIssue, ImportJob
from .pipeline import (
    CaptionSeed,
    FilterArtifact,
    FilterDecision,
    FilterRun,
    ImageTopics,
    Pipeline,
    Review,
    RunChunk,
    cascade_image_level,
    decisions_of_images,
)

__all__ = [
    "Collection", "Image", "Caption", "ImportJob", "ImportIssue", "text_hash",
    "image_upload_to",
    "Pipeline", "FilterArtifact", "FilterRun", "RunChunk", "cascade_image_level", "FilterDecision",
    "decisions_of_images", "Review", "CaptionSeed", "ImageTopics",
]
