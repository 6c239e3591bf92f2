"""Karpathy-split JSON (the ``dataset_coco.json`` layout of common captioning code)::

    {"images": [{"filepath", "filename", "imgid", "split", "sentids", "cocoid",
                 "sentences": [{"tokens", "raw", "imgid", "sentid"}]}], "dataset": <name>}

One entry per image and split (an image of a human-verified test split may have its other
captions in train: then it has a train entry too). ``imgid`` and ``sentid`` count from 0 in
position order; ``cocoid`` is the platform's image id. Tokens as Karpathy's preprocessing makes
them: lowercased, ASCII punctuation removed, split on white space. ``filepath``/``filename`` is
the image's path relative to the JSON file in an export with images (``images/ab``,
``<sha256>.jpg``), its storage name without."""
from __future__ import annotations

import posixpath
import string

from .base import Context, dumps

_PUNCT = str.maketrans("", "", string.punctuation)


def tokenize(text: str) -> list[str]:
    return text.lower().translate(_PUNCT).split()


def write(ctx: Context) -> list[str]:
    name = f"{ctx.prefix}-dataset_coco.json"
    dataset = ctx.options.get("dataset") or ctx.release.name
    with open(ctx.out_dir / name, "w", encoding="utf-8", newline="\n", buffering=1 << 20) as out:
        out.write('{"images":[')
        state = {"imgid": 0, "sentid": 0, "first": True}

        def emit(group):
            entries: dict[str, list] = {}
            for row in group:
                entries.setdefault(row[1], []).append(row)
            for split, rows in entries.items():
                imgid = state["imgid"]
                state["imgid"] += 1
                sentences = []
                for position, _split, image_id, file, caption_id, text, _sha, _fmt in rows:
                    raw = ctx.clean(text, position, "caption")
                    sentences.append({"tokens": tokenize(raw), "raw": raw, "imgid": imgid,
                                      "sentid": state["sentid"], "caption_id": caption_id})
                    state["sentid"] += 1
                position, _s, image_id, file, _c, _t, sha, fmt = rows[0]
                path = ctx.image_path(sha, fmt, file)
                entry = {"filepath": posixpath.dirname(path), "filename": posixpath.basename(path),
                         "imgid": imgid, "split": split, "sentids": [s["sentid"] for s in sentences],
                         "cocoid": image_id, "sentences": sentences}
                out.write(("" if state["first"] else ",") + dumps(entry))
                state["first"] = False

        group, current = [], None
        for row in ctx.rows(fields=("position", "split", "provenance__image", "image_file", "provenance__caption",
                                    "text", "image_sha256", "image_format")):
            if ctx.skip(row[6]):
                ctx.tick()
                continue
            if row[2] != current and group:
                emit(group)
                group = []
            current = row[2]
            group.append(row)
            ctx.tick()
        if group:
            emit(group)
        out.write('],"dataset":' + dumps(ctx.clean(dataset, -1, "dataset")) + "}\n")
    return [name]
