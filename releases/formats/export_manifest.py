"""The export's own manifest, ``release-<id>-export.json``, written last: which release and
format, every other file with its size and sha256, and where the images are.

- With images: the shards, the layout of the ``images/`` folder and how to use it (extract every
  shard into the folder of the annotation files: their image paths are relative to it), how many
  images were written and which were left out as missing.
- Without images: the storage the images live in (backend, location or bucket) and that the
  annotation files' image paths are storage-relative names of files this export does not hold.

Its bytes are deterministic like every other file (sorted keys, no timestamp but the release's
freezing time)."""
from __future__ import annotations

MANIFEST_SUFFIX = "-export.json"
STORAGE_FACTS = ("location", "base_url", "bucket_name", "endpoint_url", "region_name", "custom_domain")


def manifest_name(ctx) -> str:
    return f"{ctx.prefix}{MANIFEST_SUFFIX}"


def storage_facts(storage=None) -> dict:
    """What names the storage the images live in, without any credential."""
    if storage is None:
        from django.core.files.storage import default_storage as storage
    cls = type(getattr(storage, "_wrapped", None) or storage)
    facts = {"backend": f"{cls.__module__}.{cls.__name__}"}
    for key in STORAGE_FACTS:
        value = getattr(storage, key, None)
        if isinstance(value, str) and value:
            facts[key] = value
    return facts


def effective_options(ctx, export_format: str) -> dict:
    """The options the files were written with, defaults included (an export asked with ``{}``
    and one asked with the defaults spelt out have the same manifest)."""
    from .images import DEFAULT_SHARD_SIZE

    # verify_images changes how the copy is checked, never the bytes: it stays out of the manifest.
    options = {k: v for k, v in ctx.options.items() if k not in ("report", "missing_images", "verify_images")}
    options["images"] = "include" if ctx.with_images else "none"
    if ctx.with_images:
        options["missing_images"] = ctx.missing_policy
        if export_format != "webdataset":
            options.setdefault("image_archive", "tar")
    if export_format == "webdataset":
        options.setdefault("samples_per_shard", 10_000)
    if ctx.with_images or export_format == "webdataset":
        options.setdefault("shard_size", DEFAULT_SHARD_SIZE)
    return options


def body(ctx, export_format: str, files: list[dict], image_shards: list[str]) -> dict:
    release = ctx.release
    options = effective_options(ctx, export_format)
    data = {
        "release": {"id": release.pk, "name": release.name, "content_hash": release.content_hash,
                    "frozen_at": release.frozen_at.isoformat() if release.frozen_at else None,
                    "captions": release.items_total},
        "format": export_format, "options": options,
        "files": [f for f in files if f["name"] != manifest_name(ctx)],
        "missing_images": {"policy": ctx.missing_policy, "images": len(ctx.missing),
                           "captions_left_out": ctx.captions_skipped},
    }
    if ctx.with_images:
        data["images"] = {
            "included": True,
            "images": ctx.images_written,
            "bytes": ctx.image_bytes,
            "shards": image_shards,
            "layout": "images/<sha256[:2]>/<sha256>.<ext>" if export_format != "webdataset"
                      else "one sample per image and split: the image is the sample's <key>.<ext> member",
            "paths": "relative to the folder that holds the annotation files" if export_format != "webdataset"
                     else "the json member's 'file' names the image member of the same sample",
            "use": ("extract every images shard into the folder of the annotation files"
                    if image_shards else "the images are inside the tar shards"),
        }
    else:
        data["images"] = {
            "included": False,
            "storage": storage_facts(),
            "paths": "storage-relative: each image path in the annotation files is the name of a file in this "
                     "storage, not in this export",
            "use": "fetch the images from that storage (or export the release again with images)",
        }
    return data
