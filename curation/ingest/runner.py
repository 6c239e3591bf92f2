"""Drive one ImportJob: read its source, land good rows, report bad ones, then fetch images.

``import_run`` is safe to run twice (a re-delivered task): rows are upserted, so a second pass
creates nothing new, and the report is rebuilt from scratch.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import shutil
import tempfile
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from ..models import Caption, Image, ImportIssue, ImportJob, text_hash
from . import download, images, lines
from .report import Report, RowError
from .writer import UrlRow, insert_captions, write_url_rows

log = logging.getLogger(__name__)

DEFAULT_ORIGIN = {
    ImportJob.Kind.IMAGES: Caption.Origin.ALT_TEXT,
    ImportJob.Kind.TSV: Caption.Origin.ALT_TEXT,
    ImportJob.Kind.COCO: Caption.Origin.DATASET,
    ImportJob.Kind.COMMENTS: Caption.Origin.WEB_COMMENT,
}
PROGRESS_EVERY = 200  # members or rows between progress writes for the slow (per-image) readers
# Rows between progress writes for the line readers: the bar counts rows as they are read, not batches
# as they land (a batch is INGEST_BATCH_SIZE rows: 10,000 by default, most of a small file).
PROGRESS_ROWS = 2000


def import_run(job_id: int, *, on_progress=None) -> ImportJob:
    job = ImportJob.objects.select_related("collection").get(pk=job_id)
    if job.finished:
        return job
    ImportJob.objects.filter(pk=job.pk).update(
        status=ImportJob.Status.RUNNING, started_at=timezone.now(), rows_read=0, rows_imported=0,
        rows_skipped=0, rows_duplicate=0, images_created=0, captions_created=0, error="",
    )
    ImportIssue.objects.filter(job=job).delete()
    job.refresh_from_db()
    reader = {
        ImportJob.Kind.IMAGES: _run_images,
        ImportJob.Kind.TSV: _run_tsv,
        ImportJob.Kind.COCO: _run_coco,
        ImportJob.Kind.COMMENTS: _run_comments,
    }[job.kind]
    report = Report(job)
    try:
        reader(job, report, on_progress or (lambda job: None))
    except RowError as exc:  # the source as a whole is unreadable
        report.flush()
        return _fail(job, exc.message)
    except Exception as exc:  # noqa: BLE001 - record, then let the worker log the traceback
        log.exception("import %s failed", job.pk)
        report.flush()
        _fail(job, f"{type(exc).__name__}: {exc}")
        raise
    report.flush()
    _finalise_counts(job)
    return start_downloads(job)


def _fail(job: ImportJob, message: str) -> ImportJob:
    ImportJob.objects.filter(pk=job.pk).update(
        status=ImportJob.Status.FAILED, error=message, finished_at=timezone.now()
    )
    job.refresh_from_db()
    return job


def _finalise_counts(job: ImportJob) -> None:
    """Counts from the rows themselves, so a resumed import reports what this job really created."""
    job.refresh_from_db()
    captions = Caption.objects.filter(import_job=job).count()
    imgs = Image.objects.filter(import_job=job).count()
    imported = captions if job.kind in (ImportJob.Kind.TSV, ImportJob.Kind.COMMENTS) else job.rows_imported
    ImportJob.objects.filter(pk=job.pk).update(
        captions_created=captions, images_created=imgs, rows_imported=imported,
        rows_duplicate=max(job.rows_read - job.rows_skipped - imported, 0),
    )


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
    from ..tasks import download_images

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
    transaction.on_commit(lambda: [download_images.delay(job.pk, c) for c in chunks])
    job.refresh_from_db()
    return job


@contextlib.contextmanager
def _local_source(job: ImportJob):
    """A local path for the job's source: the server path, or the upload (copied out of S3 if need be)."""
    if job.source_path:
        yield Path(job.source_path)
        return
    try:
        yield Path(job.upload.path)
        return
    except NotImplementedError:
        pass
    suffix = PurePosixPath(job.upload.name).suffix
    with tempfile.NamedTemporaryFile(suffix=suffix) as tmp:
        with job.upload.open("rb") as src:
            shutil.copyfileobj(src, tmp, 1 << 20)
        tmp.flush()
        yield Path(tmp.name)


def _origin(job: ImportJob) -> str:
    origin = job.options.get("origin") or DEFAULT_ORIGIN[job.kind]
    if origin not in Caption.Origin.values:
        raise RowError("bad_option", f"unknown caption origin {origin!r}")
    return origin


def _language(job: ImportJob) -> str:
    return job.options.get("language") or job.collection.language


# --- Conceptual Captions TSV: caption <TAB> image URL -----------------------------------------

def _run_tsv(job, report, on_progress):
    origin, language = _origin(job), _language(job)
    batch: list[UrlRow] = []
    with _BatchWriter(job, report, on_progress, origin=origin, language=language) as writer:
        with _local_source(job) as path, open(path, "rb") as fh:
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
                    writer.submit(batch)
                    batch = []
            report.add(rows_read=count % PROGRESS_ROWS)
            writer.submit(batch)


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
            return write_url_rows(self.job, rows, origin=self.origin, language=self.language)
        finally:
            if self.threaded:
                connection.close()  # this thread's own connection

    def _collect(self):
        if self.pending is not None:
            rows, future = self.pending
            self.pending = None
            self._account(rows, future.result())

    def _account(self, rows, result):
        # The rows were counted as read when they were read (``_run_tsv``); here, what they landed.
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


# --- Comment dumps: image id <TAB> comment ----------------------------------------------------

def _run_comments(job, report, on_progress):
    origin, language = _origin(job), _language(job)
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

    with _local_source(job) as path, open(path, "rb") as fh:
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


# --- Folders and zip archives of images, with an optional sidecar CSV -------------------------

def _read_sidecar(data: bytes, report: Report, name: str) -> dict[str, list[dict]]:
    """Rows of the sidecar CSV by file name. Columns: file (or filename/file_name), caption, and
    optionally license, credit, source_url, external_id."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise RowError("invalid_utf8", f"sidecar {name} is not valid UTF-8 (byte {exc.start})") from None
    reader = csv.DictReader(io.StringIO(text))
    fields = {f.strip().lower(): f for f in reader.fieldnames or []}
    file_col = next((fields[c] for c in ("file", "filename", "file_name") if c in fields), None)
    if file_col is None or "caption" not in fields:
        raise RowError("bad_sidecar", f"sidecar {name} needs the columns file and caption (found {list(fields)})")
    rows: dict[str, list[dict]] = defaultdict(list)
    for row in reader:
        lineno = reader.line_num
        file_name = (row.get(file_col) or "").strip().replace("\\", "/")
        try:
            if not file_name:
                raise RowError("missing_field", "sidecar row has no file name")
            if None in row:
                raise RowError("extra_column", "sidecar row has more cells than the header")
            caption = lines.clean_caption(row.get(fields["caption"]) or "")
        except RowError as exc:
            report.skip(lineno, f"{name}: {file_name}", exc)
            continue
        rows[file_name].append({
            "line": lineno, "caption": caption,
            **{key: (row.get(fields[key]) or "").strip() for key in ("license", "credit", "source_url", "external_id") if key in fields},
        })
    return rows


def _run_images(job, report, on_progress):
    origin, language = _origin(job), _language(job)
    sidecar_name = job.options.get("sidecar") or "captions.csv"
    with _local_source(job) as path, images.open_members(path) as members:
        sidecar: dict[str, list[dict]] = {}
        for member in members:
            if isinstance(member, images.Member) and member.name == sidecar_name:
                sidecar = _read_sidecar(member.read(), report, sidecar_name)
        content = [m for m in members if not (isinstance(m, images.Member) and m.name == sidecar_name)]
        ImportJob.objects.filter(pk=job.pk).update(rows_total=len(content))
        seen: set[str] = set()
        for done, member in enumerate(content, start=1):
            report.add(rows_read=1)
            if isinstance(member, tuple):
                index, name, error = member
                report.skip(index, name, error)
            else:
                seen.add(member.name)
                try:
                    _land_member(job, member, sidecar.get(member.name, []), report, origin, language)
                except RowError as exc:
                    report.skip(member.index, member.name, exc)
            if done % 20 == 0 or done == len(content):
                report.flush()
                on_progress(job)
        for name, rows in sidecar.items():
            if name not in seen:
                for row in rows:
                    report.skip(row["line"], f"{sidecar_name}: {name}",
                                RowError("file_not_found", f"the sidecar names {name!r}, which is not in the source"))


def _land_member(job, member, sidecar_rows, report, origin, language):
    suffix = PurePosixPath(member.name).suffix.lower()
    if suffix not in images.IMAGE_SUFFIXES:
        raise RowError("not_an_image", f"{suffix or 'no extension'}: not an image file type")
    verified = images.verify_image(member.read())
    stem = str(PurePosixPath(member.name).with_suffix(""))
    meta = next((r for r in sidecar_rows if r.get("external_id")), {})
    external_id = meta.get("external_id") or stem
    with transaction.atomic():
        image = Image.objects.select_for_update().filter(collection_id=job.collection_id, sha256=verified.sha256).first()
        if image is not None:
            report.add(rows_duplicate=1)
        else:
            image = (
                Image.objects.select_for_update()
                .filter(collection_id=job.collection_id, status=Image.Status.MISSING)
                .filter(Q(external_id=external_id) | Q(metadata__file_name=PurePosixPath(member.name).name))
                .first()
            ) or Image(collection_id=job.collection_id, external_id=external_id, import_job=job)
            images.store_image_file(image, verified)
            image.import_line = member.index
            image.metadata = {**image.metadata, "file_name": member.name}
            for key in ("license", "credit", "source_url"):
                value = next((r[key] for r in sidecar_rows if r.get(key)), "")
                if value:
                    setattr(image, key, value[:500] if key != "source_url" else value)
            try:
                with transaction.atomic():
                    image.save()
            except IntegrityError:
                # Same external id as a different image: keep the path with its extension instead.
                image.external_id = member.name
                image.save()
            report.add(rows_imported=1)
        insert_captions([
            Caption(image=image, text=row["caption"], language=language, origin=origin,
                    source=job.source_name, import_job=job, import_line=row["line"])
            for row in sidecar_rows
        ])


# --- COCO captions JSON -----------------------------------------------------------------------

def _run_coco(job, report, on_progress):
    origin, language = _origin(job), _language(job)
    images_dir = job.options.get("images_dir")
    with _local_source(job) as path, open(path, "rb") as fh:
        try:
            doc = json.load(fh)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RowError("bad_json", f"not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("images"), list) or not isinstance(doc.get("annotations"), list):
        raise RowError("bad_coco", "a COCO captions file is an object with 'images' and 'annotations' lists")
    licenses = {lic.get("id"): lic for lic in doc.get("licenses") or [] if isinstance(lic, dict)}
    total = len(doc["images"]) + len(doc["annotations"])
    ImportJob.objects.filter(pk=job.pk).update(rows_total=total)
    by_coco_id: dict[str, int] = {}
    for index, entry in enumerate(doc["images"], start=1):
        report.add(rows_read=1)
        try:
            by_coco_id.update(_land_coco_image(job, entry, licenses, images_dir, report))
            report.add(rows_imported=1)
        except RowError as exc:
            report.skip(index, f"images[{index - 1}]", exc)
        if index % PROGRESS_EVERY == 0:
            report.flush()
            on_progress(job)
    report.flush()
    batch = []
    for index, ann in enumerate(doc["annotations"], start=1):
        report.add(rows_read=1)
        item = f"annotations[{index - 1}]"
        try:
            if not isinstance(ann, dict) or "image_id" not in ann or "caption" not in ann:
                raise RowError("missing_field", "an annotation needs image_id and caption")
            image_pk = by_coco_id.get(str(ann["image_id"]))
            if image_pk is None:
                raise RowError("unknown_image", f"image_id {ann['image_id']!r} is not among the imported images")
            if not isinstance(ann["caption"], str):
                raise RowError("bad_caption", "caption is not a string")
            caption = lines.clean_caption(ann["caption"])
        except RowError as exc:
            report.skip(len(doc["images"]) + index, item, exc)
            continue
        batch.append(Caption(image_id=image_pk, text=caption, language=language, origin=origin,
                             source=job.source_name, import_job=job, import_line=len(doc["images"]) + index,
                             external_id=str(ann.get("id", ""))[:100]))
        if len(batch) >= settings.INGEST_BATCH_SIZE or index == len(doc["annotations"]):
            report.add(rows_imported=insert_captions(batch))
            batch = []
            report.flush()
            on_progress(job)
    if batch:
        report.add(rows_imported=insert_captions(batch))


def _land_coco_image(job, entry, licenses, images_dir, report) -> dict[str, int]:
    if not isinstance(entry, dict) or "id" not in entry:
        raise RowError("missing_field", "an image entry needs an id")
    coco_id = str(entry["id"])
    file_name = str(entry.get("file_name") or "")
    url = str(entry.get("coco_url") or entry.get("flickr_url") or entry.get("url") or "")
    lic = licenses.get(entry.get("license")) or {}
    fields = dict(
        license=str(lic.get("name") or "")[:300],
        metadata={k: entry[k] for k in ("file_name", "width", "height", "date_captured", "flickr_url", "coco_url") if k in entry},
    )
    existing = Image.objects.filter(collection_id=job.collection_id, external_id=coco_id).first()
    if existing is not None:
        return {coco_id: existing.pk}
    image = Image(collection_id=job.collection_id, external_id=coco_id, import_job=job, import_line=None, **fields)
    if images_dir and file_name:
        candidate = (Path(images_dir) / file_name).resolve()
        if Path(images_dir).resolve() not in candidate.parents:
            raise RowError("unsafe_path", f"file_name {file_name!r} leaves the images folder")
        if not candidate.is_file():
            raise RowError("file_not_found", f"{file_name} is not in {images_dir}")
        verified = images.verify_image(candidate.read_bytes())
        same = Image.objects.filter(collection_id=job.collection_id, sha256=verified.sha256).first()
        if same is not None:
            return {coco_id: same.pk}
        images.store_image_file(image, verified)
    elif url:
        download.check_url_syntax(url)
        same = Image.objects.filter(collection_id=job.collection_id, source_url=url).first()
        if same is not None:
            return {coco_id: same.pk}
        image.source_url = url
        image.status = Image.Status.PENDING
    else:
        image.status = Image.Status.MISSING
    image.save()
    return {coco_id: image.pk}


# --- Downloads --------------------------------------------------------------------------------

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
