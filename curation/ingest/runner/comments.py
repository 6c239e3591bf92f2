"""Comment dumps (image id <TAB> comment): the reader, which lands comments in batches on the images
of the collection with those external ids, and the look-up that finds those images, creating a
placeholder image for an id not seen yet unless the job asks to skip unknown ids.
"""
from __future__ import annotations

from django.conf import settings
from django.db import transaction

from ...models import Caption, Image, ImportJob
from .. import lines
from ..report import RowError
from ..writer import insert_captions
from .source import PROGRESS_ROWS, caption_language, caption_origin, local_source


def run_comments(job, report, on_progress):
    origin, language = caption_origin(job), caption_language(job)
    batch: list[tuple[int, str, str]] = []

    placeholders = (job.options or {}).get("unknown_images", "placeholder") == "placeholder"

    def land():
        if not batch:
            return
        with transaction.atomic():
            ids, new = _images_by_external_id(job, {ext for _, ext, _ in batch}, create=placeholders)
            rows = []
            for lineno, ext, text in batch:
                if ext not in ids:  # unknown_images=skip: the line is reported, nothing is created
                    report.skip(lineno, f"{ext}\t{text}", RowError(
                        "unknown_image", f"no image with id {ext!r} in this collection"))
                    continue
                if ext in new:  # reported once, on the line that created the placeholder
                    new.discard(ext)
                    report.warn(lineno, ext, "placeholder_image",
                                f"no image with id {ext!r} in this collection yet: a placeholder was created; an "
                                "image import whose file names are these ids fills it in")
                rows.append(Caption(image_id=ids[ext], text=text, language=language, origin=origin,
                                    source=job.source_name, import_job=job, import_line=lineno))
            created = insert_captions(rows)
        report.add(rows_imported=created)
        report.flush()
        batch.clear()
        on_progress(job)

    with local_source(job) as path, open(path, "rb") as fh:
        ImportJob.objects.filter(pk=job.pk).update(rows_total=lines.count_lines(fh))
        count = 0
        for count, (lineno, value) in enumerate(lines.iter_lines(fh), start=1):
            if count % PROGRESS_ROWS == 0:  # rows count as read when read, so that the bar moves with them
                report.add(rows_read=PROGRESS_ROWS)
                report.flush()
                on_progress(job)
            try:
                if isinstance(value, RowError):
                    raise value
                if "\t" not in value:
                    raise RowError("missing_column", "expected: image id <TAB> comment")
                ext, text = value.split("\t", 1)
                ext = ext.strip()
                if not ext or len(ext) > 300:
                    raise RowError("bad_image_id", "image id is empty or longer than 300 characters")
                text = lines.clean_caption(text)
            except RowError as exc:
                report.skip(lineno, value if isinstance(value, str) else "", exc)
                continue
            batch.append((lineno, ext, text))
            if len(batch) >= settings.INGEST_BATCH_SIZE:
                land()
        report.add(rows_read=count % PROGRESS_ROWS)
        land()
        report.flush()


def _images_by_external_id(job, external_ids: set[str], *, create: bool = True) -> tuple[dict[str, int], set[str]]:
    """Image ids by external id, and the external ids whose placeholder this call created.

    With ``create`` (the import option ``unknown_images=placeholder``, the default: a comment
    collection whose photos come later) an id not seen yet gets a placeholder image (status
    missing), which a later folder or zip import whose file names are those ids fills in; without
    it, unknown ids are left out for the caller to report.
    """
    found = dict(
        Image.objects.filter(collection_id=job.collection_id, external_id__in=external_ids).values_list("external_id", "pk")
    )
    unknown = {ext for ext in external_ids if ext not in found}
    if not unknown or not create:
        return found, set()
    Image.objects.bulk_create(
        [Image(collection_id=job.collection_id, external_id=ext, status=Image.Status.MISSING, import_job=job)
         for ext in unknown], ignore_conflicts=True)
    found = dict(
        Image.objects.filter(collection_id=job.collection_id, external_id__in=external_ids).values_list("external_id", "pk")
    )
    return found, unknown
