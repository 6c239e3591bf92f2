"""Downloads of the images a job names by URL: queuing its pending images as chunks of download
tasks (or finishing the job when there is nothing to fetch), fetching, verifying and storing one
chunk, and folding an image whose file turns out to be one the collection already has into it.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from captionlab.tasks import enqueue

from ...models import Caption, Image, ImportJob, text_hash
from .. import download, images
from ..report import Report, RowError


def start_downloads(job: ImportJob) -> ImportJob:
    """Queue download tasks for the job's pending images, in chunks, streaming their ids."""
    pending = Image.objects.filter(import_job=job, status=Image.Status.PENDING).exclude(source_url="")
    total = pending.count() if job.options.get("download", True) else 0
    if not total:
        ImportJob.objects.filter(pk=job.pk).update(status=ImportJob.Status.DONE, finished_at=timezone.now())
        job.refresh_from_db()
        return job
    ImportJob.objects.filter(pk=job.pk).update(
        status=ImportJob.Status.DOWNLOADING, downloads_total=total, downloads_done=0, downloads_failed=0
    )
    size = settings.INGEST_DOWNLOAD_CHUNK
    chunk: list[int] = []
    chunks: list[list[int]] = []
    for pk in pending.order_by("pk").values_list("pk", flat=True).iterator(chunk_size=5000):
        chunk.append(pk)
        if len(chunk) >= size:
            chunks.append(chunk)
            chunk = []
    if chunk:
        chunks.append(chunk)
    transaction.on_commit(lambda: [enqueue("curation.download_images", job.pk, c) for c in chunks])
    job.refresh_from_db()
    return job


def download_chunk(job_id: int, image_ids: list[int]) -> None:
    """Fetch, verify and store a chunk of pending images; failures go to the job's report."""
    job = ImportJob.objects.get(pk=job_id)
    report = Report(job)
    todo = list(Image.objects.filter(pk__in=image_ids, status=Image.Status.PENDING))

    def fetch(image):
        try:
            return image, images.verify_image(download.fetch(image.source_url).data)
        except RowError as exc:
            return image, exc

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(fetch, todo))
    for image, outcome in results:
        if isinstance(outcome, RowError):
            Image.objects.filter(pk=image.pk).update(status=Image.Status.FAILED, error=f"{outcome.code}: {outcome.message}")
            report.skip(image.import_line, image.source_url, outcome, counter="downloads_failed")
            continue
        _store_downloaded(image, outcome, report)
        report.add(downloads_done=1)
    report.flush()
    ImportJob.objects.filter(
        pk=job.pk, status=ImportJob.Status.DOWNLOADING,
        downloads_total__lte=F("downloads_done") + F("downloads_failed"),
    ).update(status=ImportJob.Status.DONE, finished_at=timezone.now())


def _store_downloaded(image: Image, verified, report: Report) -> None:
    with transaction.atomic():
        same = (
            Image.objects.select_for_update()
            .filter(collection_id=image.collection_id, sha256=verified.sha256).exclude(pk=image.pk).first()
        )
        if same is None:
            images.store_image_file(image, verified)
            image.save()
            return
        # The same picture under another URL: keep one Image, move this one's captions over.
        for caption in Caption.objects.filter(image=image):
            if Caption.objects.filter(image=same, text_hash=text_hash(caption.text), source=caption.source).exists():
                caption.delete()
            else:
                Caption.objects.filter(pk=caption.pk).update(image=same)
        report.warn(image.import_line, image.source_url, "duplicate_image",
                    f"same file as image {same.pk}; its captions were attached there")
        image.delete()
