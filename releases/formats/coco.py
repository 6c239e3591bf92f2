"""COCO captions JSON, one file per split (``release-<id>-captions_<split>.json``), as
pycocotools' ``COCO`` loader reads it::

    {"info": {...}, "licenses": [{"id", "name", "url"}],
     "images": [{"id", "file_name", "width", "height", "license", "sha256", "credit", ...}],
     "annotations": [{"id", "image_id", "caption"}]}

Image ids are the platform's image ids and annotation ids its caption ids (both copied into the
release). Written incrementally: one pass over the split's rows for the images, one for the
annotations. ``options["split"]`` writes one split only. ``file_name`` is the image's path
relative to the folder of the JSON files in an export with images (``images/ab/<sha256>.jpg``),
its storage name without; the captions of an image missing from storage are left out."""
from __future__ import annotations

from .. import ReleaseError
from ..splits import SPLITS
from .base import Context, dumps


def _license_table(ctx: Context, split: str) -> dict[str, int]:
    from releases.models import ReleaseItem

    names = (ReleaseItem.objects.filter(release=ctx.release, split=split).order_by("license")
             .values_list("license", flat=True).distinct())
    return {name: n for n, name in enumerate(names, start=1)}


def _write_split(ctx: Context, split: str) -> str:
    release = ctx.release
    name = f"{ctx.prefix}-captions_{split}.json"
    licenses = _license_table(ctx, split)
    info = {"description": ctx.clean(release.name, -1, "name"), "version": release.content_hash[:12],
            "content_hash": release.content_hash, "split": split, "contributor": "CaptionLab",
            "date_created": release.frozen_at.date().isoformat() if release.frozen_at else "",
            "year": release.frozen_at.year if release.frozen_at else None, "url": ""}
    with open(ctx.out_dir / name, "w", encoding="utf-8", newline="\n", buffering=1 << 20) as out:
        out.write('{"info":' + dumps(info) + ',"licenses":[')
        out.write(",".join(dumps({"id": n, "name": ctx.clean(lic, -1, "license") or "unknown",
                                  "url": lic if lic.startswith(("http://", "https://")) else ""})
                           for lic, n in licenses.items()))
        out.write('],"images":[')
        first, last_image = True, None
        for (position, image_id, sha, file, fmt, width, height, lic, credit, external_id) in ctx.rows(
                split, fields=("position", "provenance__image", "image_sha256", "image_file", "image_format", "width",
                               "height", "license", "credit", "external_id")):
            if image_id == last_image or sha in ctx.missing:
                continue
            last_image = image_id
            image = {"id": image_id, "file_name": ctx.image_path(sha, fmt, file), "width": width, "height": height,
                     "license": licenses.get(lic, 0), "sha256": sha, "credit": ctx.clean(credit, position, "credit"),
                     "external_id": ctx.clean(external_id, position, "external_id")}
            out.write(("" if first else ",") + dumps(image))
            first = False
        out.write('],"annotations":[')
        first = True
        for position, image_id, caption_id, text, sha in ctx.rows(
                split, fields=("position", "provenance__image", "provenance__caption", "text", "image_sha256")):
            if ctx.skip(sha):
                ctx.tick()
                continue
            out.write(("" if first else ",") + dumps({"id": caption_id, "image_id": image_id,
                                                     "caption": ctx.clean(text, position, "caption")}))
            first = False
            ctx.tick()
        out.write("]}\n")
    return name


def write(ctx: Context) -> list[str]:
    wanted = ctx.options.get("split")
    if wanted and wanted not in SPLITS:
        raise ReleaseError(f"split must be one of {', '.join(SPLITS)}.", "split")
    counts = ctx.release.counts or {}
    splits = [wanted] if wanted else [s for s in SPLITS if counts.get(s, {}).get("captions")]
    return [_write_split(ctx, split) for split in splits]
