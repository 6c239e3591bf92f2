"""Conceptual Captions TSV files (caption <TAB> image URL): the reader, which checks each line and
counts rows as it reads them, and ``_BatchWriter``, which lands its batches, on PostgreSQL in a
second thread so that parsing the next batch overlaps writing the previous one.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import connection

from ...models import ImportJob
from .. import download, lines, writer
from ..report import RowError
from ..writer import UrlRow
from .source import PROGRESS_ROWS, caption_language, caption_origin, local_source


def run_tsv(job, report, on_progress):
    origin, language = caption_origin(job), caption_language(job)
    batch: list[UrlRow] = []
    with _BatchWriter(job, report, on_progress, origin=origin, language=language) as batches:
        with local_source(job) as path, open(path, "rb") as fh:
            ImportJob.objects.filter(pk=job.pk).update(rows_total=lines.count_lines(fh))
            count = 0
            for count, (lineno, value) in enumerate(lines.iter_lines(fh), start=1):
                if count % PROGRESS_ROWS == 0:  # rows count as read when read; what they land, when landed
                    report.add(rows_read=PROGRESS_ROWS)
                    report.flush()
                    on_progress(job)
                try:
                    if isinstance(value, RowError):
                        raise value
                    caption, url = lines.split_columns(value, ("caption", "image URL"))
                    caption = lines.clean_caption(caption)
                    url = url.strip()
                    download.check_url_syntax(url)
                except RowError as exc:
                    report.skip(lineno, value if isinstance(value, str) else "", exc)
                    continue
                batch.append(UrlRow(lineno, caption, url))
                if len(batch) >= settings.INGEST_BATCH_SIZE:
                    batches.submit(batch)
                    batch = []
            report.add(rows_read=count % PROGRESS_ROWS)
            batches.submit(batch)


class _BatchWriter:
    """Lands TSV batches; on PostgreSQL outside a transaction, in a second thread with its own
    connection, so parsing the next batch overlaps the database writing the previous one.
    At most one batch is in flight, which keeps memory flat whatever the file size."""

    def __init__(self, job, report, on_progress, *, origin, language):
        self.job, self.report, self.on_progress = job, report, on_progress
        self.origin, self.language = origin, language
        self.threaded = connection.vendor == "postgresql" and not connection.in_atomic_block
        self.pool = ThreadPoolExecutor(max_workers=1) if self.threaded else None
        self.pending = None

    def _write(self, rows):
        try:
            return writer.write_url_rows(self.job, rows, origin=self.origin, language=self.language)
        finally:
            if self.threaded:
                connection.close()  # this thread's own connection

    def _collect(self):
        if self.pending is not None:
            rows, future = self.pending
            self.pending = None
            self._account(rows, future.result())

    def _account(self, rows, result):
        # The rows were counted as read when they were read (``run_tsv``); here, what they landed.
        self.report.add(rows_imported=result.captions_created,
                        images_created=result.images_created, captions_created=result.captions_created)
        self.report.flush()
        self.on_progress(self.job)

    def submit(self, rows):
        if not rows:
            return
        if not self.threaded:
            self._account(rows, self._write(rows))
            return
        self._collect()
        self.pending = (rows, self.pool.submit(self._write, rows))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            if exc[0] is None:
                self._collect()
        finally:
            if self.pool:
                self.pool.shutdown(wait=True)
        return False
