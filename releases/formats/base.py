"""What every export format shares: the row columns, the one JSON encoding, the writer's ``Context``
(the release, the staging folder, options, progress, the report, missing images), the per-caption
``record``, an image's path inside an export and a written file's entry. The package (``write``) and each
format's module build on this one."""
from __future__ import annotations

import hashlib
import json
import posixpath
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
IMAGES = ("include", "none")
MISSING = ("skip", "fail")
MISSING_LISTED = 50  # missing files named in a failure message (the report lists up to REPORT_LIMIT)
EXTENSIONS = {"JPEG": "jpg", "MPO": "jpg", "PNG": "png", "WEBP": "webp", "GIF": "gif", "BMP": "bmp", "TIFF": "tif"}


def dumps(obj) -> str:
    """The one JSON encoding of every format: sorted keys, fixed separators, UTF-8 text."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)



def extension(fmt: str, file: str) -> str:
    ext = EXTENSIONS.get(fmt or "") or posixpath.splitext(file or "")[1].lstrip(".").lower()
    return ext if ext.isalnum() else "bin"


def relative_name(sha: str, fmt: str, file: str) -> str:
    """The image's stable path inside an export with images."""
    return f"images/{sha[:2]}/{sha}.{extension(fmt, file)}"


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
