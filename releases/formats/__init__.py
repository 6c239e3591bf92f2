"""Export formats of a frozen release.

``write(export_format, release, out_dir, options, progress=None, storage_open=None)`` writes the
format's files into ``out_dir`` and returns ``[{"name", "size", "sha256"}]`` sorted by name. Every
writer streams ReleaseItem rows in position order with ``.iterator()`` (constant memory) and writes
deterministic bytes: no timestamps, no random order, JSON with sorted keys and fixed separators,
tar and zip members with fixed metadata, Parquet with fixed settings. Writing the same release
twice gives byte-identical files.

Images (``options["images"]``): ``"include"`` (the default) ships them: WebDataset inside its
samples, every other format as ``images`` tar or zip shards (``images.py``) whose members are
``images/<sha256[:2]>/<sha256>.<ext>``, the path the annotation files give. ``"none"`` ships no
image: the image paths are storage names, and the export's manifest (``export_manifest.py``,
written last, for every format) says which storage they are relative to.

An image missing from storage (with images only; without, no image file is read) follows
``options["missing_images"]`` (default: the release's ``missing_image``): "skip" leaves out its
captions and counts them in the report and the manifest, "fail" raises ReleaseError with the list
of every missing file.

Nothing half-written is ever visible in ``out_dir``: the files are written in a hidden staging
folder inside it and renamed to their names only once all are complete; an exception removes the
staging folder.

Characters a format cannot hold (NUL, the other C0 control characters but tab, LF and CR, lone
surrogates, U+FFFE/U+FFFF: the XML-illegal ones) are stripped from every text cell and recorded in
``options["report"]`` (a list, when the caller gives one).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from .. import ReleaseError, Report

BAD_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
CHUNK = 2000
# Columns every row reader yields, in this order (ids come from the provenance copied at freezing
# time, so they survive the deletion of the source image or caption).
ROW_FIELDS = ("position", "split", "image_sha256", "image_file", "image_format", "width", "height", "license",
              "credit", "external_id", "text", "language", "human_verified", "provenance__image",
              "provenance__caption")
IMAGES = ("include", "none")
MISSING = ("skip", "fail")
MISSING_LISTED = 50  # missing files named in a failure message (the report lists up to REPORT_LIMIT)
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
        self.with_images = self.options.get("images", "include") == "include"
        self.missing_policy = self.options.get("missing_images") or (release.config or {}).get("missing_image", "skip")
        self.missing: set[str] = set()  # sha256 of the images left out as missing
        self.missing_files: list[str] = []
        self.captions_skipped = 0
        self.images_written = self.image_bytes = 0
        self.images_trusted = 0  # copied without a second sha256 (an unchanged file: formats.images.trusted)
        self.hashed: dict[str, dict] = {}  # file entries computed while writing (no second read)

    def image_path(self, sha: str, fmt: str, file: str) -> str:
        """The path an annotation gives for an image: relative inside an export with images, the
        storage name without."""
        if not self.with_images:
            return file
        from .images import relative_name

        return relative_name(sha, fmt, file)

    def skip(self, sha: str) -> bool:
        """Whether the rows of this image are left out (its file is missing); counted."""
        if self.missing and sha in self.missing:
            self.captions_skipped += 1
            return True
        return False

    def image_missing(self, sha: str, position: int, image_id, name: str, why: str) -> None:
        """An image file that cannot be shipped: remembered (the caller skips or fails) and reported."""
        if sha in self.missing:
            return
        self.missing.add(sha)
        self.missing_files.append(name or f"image #{image_id} (no file)")
        self.report.add("missing_image", f"Image #{image_id} ({name or 'no file'}) of item {position} {why}; "
                        + ("its captions are left out." if self.missing_policy == "skip" else "the export fails."),
                        position=position, image=image_id, file=name)

    def check_missing(self) -> None:
        """Under ``missing_images: fail``, raise with the list of every missing file."""
        if self.missing_policy != "fail" or not self.missing_files:
            return
        n = len(self.missing_files)
        listed = ", ".join(self.missing_files[:MISSING_LISTED]) + (f" and {n - MISSING_LISTED} more"
                                                                    if n > MISSING_LISTED else "")
        raise ReleaseError(f"{n} image file{'s are' if n > 1 else ' is'} missing from storage: {listed}. The export "
                           "is set to fail on a missing image (missing_images: fail); restore the files, or export "
                           "with missing_images: skip to leave their captions out.", "missing_images")

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
        from releases.models import ReleaseItem

        qs = ReleaseItem.objects.filter(release=self.release)
        if split:
            qs = qs.filter(split=split)
        return qs.order_by("position").values_list(*fields).iterator(chunk_size=CHUNK)

    def tick(self, n: int = 1) -> None:
        self.done += n
        if self.progress and self.done % 5000 == 0:
            self.progress(self.done, self.total)

def record(row: tuple, ctx: Context, provenance: dict | None = None) -> dict:
    """The plain per-caption record most formats share (texts cleaned)."""
    (position, split, sha, file, fmt, width, height, lic, credit, external_id, text, language, verified,
     image_id, caption_id) = row
    out = {"position": position, "split": split, "image_id": image_id, "image_sha256": sha,
           "file": ctx.image_path(sha, fmt, file),
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
    options = options or {}
    if options.get("images", "include") not in IMAGES:
        raise ReleaseError(f"images must be one of {', '.join(IMAGES)}.", "images")
    missing = options.get("missing_images")
    if missing is not None and missing not in MISSING:
        raise ReleaseError(f"missing_images must be one of {', '.join(MISSING)}.", "missing_images")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=out_dir))
    try:
        ctx = Context(release, staging, options, progress, storage_open)
        names = _write_all(export_format, ctx, writers)
        entries = [ctx.hashed.get(name) or file_entry(staging / name) for name in sorted(names)]
        for name in sorted(names):  # every file complete: now, and only now, under its name
            os.replace(staging / name, out_dir / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if progress:
        progress(ctx.total, ctx.total)
    return entries


def _write_all(export_format: str, ctx: Context, writers: dict) -> list[str]:
    """Images first (so the annotations can leave out what is missing), then the format's files,
    then the export manifest."""
    from . import export_manifest, images

    shards = []
    if export_format not in ("webdataset", "manifest") and ctx.with_images:
        shards = images.write(ctx)
        ctx.check_missing()
    names = list(writers[export_format](ctx))
    ctx.check_missing()
    names += shards
    if ctx.missing:
        ctx.report.add("missing_images", f"{len(ctx.missing)} image file(s) missing from storage: "
                       f"{ctx.captions_skipped} caption(s) left out of the export.", images=len(ctx.missing),
                       captions=ctx.captions_skipped)
    ctx.report.finish()
    if export_format == "manifest":
        return names
    entries = [ctx.hashed.get(name) or file_entry(ctx.out_dir / name) for name in sorted(names)]
    for entry in entries:
        ctx.hashed[entry["name"]] = entry
    name = export_manifest.manifest_name(ctx)
    with open(ctx.out_dir / name, "w", encoding="utf-8", newline="\n") as out:
        out.write(json.dumps(export_manifest.body(ctx, export_format, entries, shards), sort_keys=True, indent=2,
                             ensure_ascii=False) + "\n")
    return names + [name]


__all__ = ["write", "FORMATS", "Context", "record", "dumps", "BAD_CHARS"]
