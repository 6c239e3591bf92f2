"""Export formats of a frozen release.

``write(export_format, release, out_dir, options, progress=None, storage_open=None)`` writes the
format's files into ``out_dir`` (a folder the caller owns) and returns
``[{"name", "size", "sha256"}]`` sorted by name. Every writer streams ReleaseItem rows in position
order with ``.iterator()`` (constant memory) and writes deterministic bytes: no timestamps, no
random order, JSON with sorted keys and fixed separators, tar members with fixed metadata, Parquet
with fixed settings. Writing the same release twice gives byte-identical files.

Characters a format cannot hold (NUL, the other C0 control characters but tab, LF and CR, lone
surrogates, U+FFFE/U+FFFF: the XML-illegal ones) are stripped from every text cell and recorded in
``options["report"]`` (a list, when the caller gives one), as are image files missing from
storage (WebDataset only: the other formats never read image bytes). A missing image follows the
release's ``missing_image`` setting: "skip" leaves its sample out with a report entry, "fail"
raises ReleaseError.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from .. import ReleaseError, Report

BAD_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
CHUNK = 2000
# Columns every row reader yields, in this order (ids come from the provenance copied at freezing
# time, so they survive the deletion of the source image or caption).
ROW_FIELDS = ("position", "split", "image_sha256", "image_file", "image_format", "width", "height", "license",
              "credit", "external_id", "text", "language", "human_verified", "provenance__image",
              "provenance__caption")
EXTENSIONS = {"JPEG": "jpg", "MPO": "jpg", "PNG": "png", "WEBP": "webp", "GIF": "gif", "BMP": "bmp", "TIFF": "tif"}


def dumps(obj) -> str:
    """The one JSON encoding of every format: sorted keys, fixed separators, UTF-8 text."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Context:
    """What a writer needs: the release, the folder, options, progress and the report."""

    def __init__(self, release, out_dir: Path, options: dict, progress=None, storage_open=None):
        self.release = release
        self.out_dir = Path(out_dir)
        self.options = options or {}
        report = self.options.get("report")
        self.report = Report(report if isinstance(report, list) else None)
        self.progress = progress
        self._storage_open = storage_open
        self.total = release.items_total or (release.counts or {}).get("total", {}).get("captions", 0)
        self.done = 0
        self.prefix = f"release-{release.pk}"

    def open_image(self, name: str):
        if self._storage_open is not None:
            return self._storage_open(name)
        from django.core.files.storage import default_storage

        return default_storage.open(name, "rb")

    def clean(self, value: str, position: int, field: str) -> str:
        """``value`` without the characters no format may hold; a removal is recorded."""
        if not value or BAD_CHARS.search(value) is None:
            return value
        removed = sorted({f"U+{ord(ch):04X}" for ch in BAD_CHARS.findall(value)})
        self.report.add("invalid_characters", f"Item {position}: {field} had characters the format cannot hold "
                        f"({', '.join(removed)}); they were removed.", position=position, field=field,
                        removed=removed)
        return BAD_CHARS.sub("", value)

    def rows(self, split: str | None = None, fields=ROW_FIELDS):
        """Rows (tuples of ``fields``) in position order, streamed."""
        from curation.models import ReleaseItem

        qs = ReleaseItem.objects.filter(release=self.release)
        if split:
            qs = qs.filter(split=split)
        return qs.order_by("position").values_list(*fields).iterator(chunk_size=CHUNK)

    def tick(self, n: int = 1) -> None:
        self.done += n
        if self.progress and self.done % 5000 == 0:
            self.progress(self.done, self.total)

    def missing_image(self, position: int, image_id, name: str, why: str) -> None:
        message = f"Image #{image_id} ({name or 'no file'}) of item {position} {why}"
        if (self.release.config or {}).get("missing_image", "skip") == "fail":
            raise ReleaseError(message + "; the release is set to fail on a missing image.", "missing_image")
        self.report.add("missing_image", message + "; its sample is left out.", position=position, image=image_id,
                        file=name)


def record(row: tuple, ctx: Context, provenance: dict | None = None) -> dict:
    """The plain per-caption record most formats share (texts cleaned)."""
    (position, split, sha, file, fmt, width, height, lic, credit, external_id, text, language, verified,
     image_id, caption_id) = row
    out = {"position": position, "split": split, "image_id": image_id, "image_sha256": sha, "file": file,
           "width": width, "height": height, "caption_id": caption_id,
           "caption": ctx.clean(text, position, "caption"), "language": language,
           "license": ctx.clean(lic, position, "license"), "credit": ctx.clean(credit, position, "credit"),
           "external_id": ctx.clean(external_id, position, "external_id"), "human_verified": verified}
    if provenance is not None:
        out["provenance"] = provenance
    return out


def file_entry(path: Path) -> dict:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
            size += len(block)
    return {"name": path.name, "size": size, "sha256": digest.hexdigest()}


def _writers():
    from . import coco, csv, jsonl, karpathy, parquet, webdataset

    return {"coco": coco.write, "karpathy": karpathy.write, "jsonl": jsonl.write, "csv": csv.write,
            "parquet": parquet.write, "webdataset": webdataset.write, "manifest": jsonl.write_manifest}


FORMATS = ("coco", "karpathy", "jsonl", "csv", "parquet", "webdataset")


def write(export_format: str, release, out_dir: Path, options: dict | None = None, progress=None,
          storage_open=None) -> list[dict]:
    """Write one format of a frozen release into ``out_dir``; [{name, size, sha256}] by name."""
    if not release.frozen:
        raise ReleaseError(f"Release {release.name!r} is not frozen ({release.status}); only a frozen release "
                           "can be exported.", "status")
    writers = _writers()
    if export_format not in writers:
        raise ReleaseError(f"Unknown export format {export_format!r}; formats are {', '.join(FORMATS)}.", "format")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = Context(release, out_dir, options or {}, progress, storage_open)
    names = writers[export_format](ctx)
    ctx.report.finish()
    if progress:
        progress(ctx.total, ctx.total)
    return [file_entry(out_dir / name) for name in sorted(names)]


__all__ = ["write", "FORMATS", "Context", "record", "dumps", "BAD_CHARS"]
