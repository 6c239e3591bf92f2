"""Landing rows in bulk.

On PostgreSQL a batch is COPYed into a temporary staging table and moved into the real tables
with two set-based ``INSERT ... ON CONFLICT DO NOTHING`` statements (images by URL, captions by
image + text hash + source), so re-importing a file creates nothing twice and the importer runs
near the speed of a raw COPY. Elsewhere (SQLite, the embedded default) the same semantics are
reached with the ORM's bulk_create.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from ..models import Caption, Image, ImportJob, text_hash


@dataclass
class UrlRow:
    line: int
    caption: str
    url: str


@dataclass
class BatchResult:
    images_created: int
    captions_created: int


def write_url_rows(job: ImportJob, rows: list[UrlRow], *, origin: str, language: str) -> BatchResult:
    """Land (caption, image URL) rows: one pending Image per new URL, one Caption per new text."""
    if not rows:
        return BatchResult(0, 0)
    if connection.vendor == "postgresql":
        return _write_url_rows_postgres(job, rows, origin=origin, language=language)
    return _write_url_rows_orm(job, rows, origin=origin, language=language)


_STAGE = "captionlab_ingest_stage"


def _write_url_rows_postgres(job, rows, *, origin, language) -> BatchResult:
    params = {
        "collection": job.collection_id, "job": job.pk, "origin": origin,
        "language": language, "source": job.source_name,
    }
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {_STAGE} (line integer, url text, caption text) ON COMMIT DELETE ROWS")
        with cursor.copy(f"COPY {_STAGE} (line, url, caption) FROM STDIN") as copy:
            for row in rows:
                copy.write_row((row.line, row.url, row.caption))
        cursor.execute(
            f"""
            INSERT INTO curation_image (collection_id, file, thumbnail, status, sha256, phash, width, height,
                format, file_size, source_url, external_id, metadata, license, credit, error,
                import_job_id, import_line, created_at)
            SELECT %(collection)s, '', '', 'pending', NULL, '', NULL, NULL, '', NULL, s.url, '', '{{}}'::jsonb,
                '', '', '', %(job)s, min(s.line), now()
            FROM {_STAGE} s GROUP BY s.url ORDER BY min(s.line)
            ON CONFLICT (collection_id, source_url) WHERE NOT (source_url = '') DO NOTHING
            """,  # noqa: S608
            params,
        )
        images_created = cursor.rowcount
        cursor.execute(
            f"""
            INSERT INTO curation_caption (image_id, text, text_hash, language, origin, parent_id, source,
                import_job_id, import_line, external_id, metadata, created_at)
            SELECT i.id, s.caption, encode(sha256(convert_to(s.caption, 'UTF8')), 'hex'), %(language)s,
                %(origin)s, NULL, %(source)s, %(job)s, s.line, '', '{{}}'::jsonb, now()
            FROM {_STAGE} s
            JOIN curation_image i ON i.collection_id = %(collection)s AND i.source_url = s.url
                AND NOT (i.source_url = '')
            ON CONFLICT (image_id, text_hash, source) DO NOTHING
            """,  # noqa: S608
            params,
        )
        captions_created = cursor.rowcount
    return BatchResult(images_created, captions_created)


def _write_url_rows_orm(job, rows, *, origin, language) -> BatchResult:
    now = timezone.now()
    with transaction.atomic():
        urls = {}
        for row in rows:
            urls.setdefault(row.url, row.line)
        existing = dict(
            Image.objects.filter(collection_id=job.collection_id, source_url__in=list(urls)).values_list("source_url", "pk")
        )
        new = [
            Image(collection_id=job.collection_id, source_url=url, status=Image.Status.PENDING,
                  import_job=job, import_line=line, created_at=now)
            for url, line in urls.items() if url not in existing
        ]
        Image.objects.bulk_create(new, batch_size=500)
        ids = dict(
            Image.objects.filter(collection_id=job.collection_id, source_url__in=list(urls)).values_list("source_url", "pk")
        )
        captions = [
            Caption(image_id=ids[row.url], text=row.caption, text_hash=text_hash(row.caption), language=language,
                    origin=origin, source=job.source_name, import_job=job, import_line=row.line, created_at=now)
            for row in rows
        ]
        captions_created = insert_captions(captions)
    return BatchResult(len(new), captions_created)


def insert_captions(captions: list[Caption]) -> int:
    """Insert captions, skipping ones already present (image + text hash + source); returns how many landed."""
    if not captions:
        return 0
    for caption in captions:
        caption.text_hash = caption.text_hash or text_hash(caption.text)
    image_ids = {c.image_id for c in captions}
    sources = {c.source for c in captions}
    before = Caption.objects.filter(image_id__in=image_ids, source__in=sources).count()
    Caption.objects.bulk_create(captions, batch_size=1000, ignore_conflicts=True)
    after = Caption.objects.filter(image_id__in=image_ids, source__in=sources).count()
    return after - before
