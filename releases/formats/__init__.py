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

import json
import os
import shutil
import tempfile
from pathlib import Path

from .. import ReleaseError
from .base import BAD_CHARS, IMAGES, MISSING, Context, dumps, file_entry, record


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
