"""COCO captions JSON files: the reader, which lands the ``images`` entries (from a local images
folder, as URLs to download, or as missing images) and then the ``annotations`` as captions in
batches, and the landing of one image entry, which reuses an image the collection already has.
"""
from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings

from ...models import Caption, Image, ImportJob
from .. import download, images, lines
from ..report import RowError
from ..writer import insert_captions
from .source import PROGRESS_EVERY, caption_language, caption_origin, local_source


def run_coco(job, report, on_progress):
    origin, language = caption_origin(job), caption_language(job)
    images_dir = job.options.get("images_dir")
    with local_source(job) as path, open(path, "rb") as fh:
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
