"""Folders and zip archives of images, with an optional sidecar CSV of captions and credits: reading
the sidecar, walking the members (reporting those that are not images or that the sidecar names but
the source lacks), and landing one image, deduplicated by its sha256 and filling in a placeholder
image with its external id or file name, with its sidecar captions.
"""
from __future__ import annotations

import csv
import io
from collections import defaultdict
from pathlib import PurePosixPath

from django.db import IntegrityError, transaction
from django.db.models import Q

from ...models import Caption, Image, ImportJob
from .. import images, lines
from ..report import Report, RowError
from ..writer import insert_captions
from .source import caption_language, caption_origin, local_source


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


def run_images(job, report, on_progress):
    origin, language = caption_origin(job), caption_language(job)
    sidecar_name = job.options.get("sidecar") or "captions.csv"
    with local_source(job) as path, images.open_members(path) as members:
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
