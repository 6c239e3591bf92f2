"""CSV: a header, then one row per caption in position order.

Written through captionlab.csv_safe, the platform's one CSV writer: formula-like cells get a leading
apostrophe, line breaks inside captions are kept in a quoted cell."""
from __future__ import annotations

import csv as _csv

from captionlab import csv_safe

from .base import Context, record

COLUMNS = ("position", "split", "image_id", "image_sha256", "file", "width", "height", "caption_id", "caption",
           "language", "license", "credit", "external_id", "human_verified")


def write(ctx: Context) -> list[str]:
    name = f"{ctx.prefix}.csv"
    with open(ctx.out_dir / name, "w", encoding="utf-8", newline="", buffering=1 << 20) as out:
        writer = csv_safe.writer(out, lineterminator="\r\n", quoting=_csv.QUOTE_MINIMAL)
        writer.writerow(COLUMNS)
        for row in ctx.rows():
            if ctx.skip(row[2]):
                ctx.tick()
                continue
            rec = record(row, ctx)
            writer.writerow([("" if rec[c] is None else rec[c]) if c != "human_verified"
                             else ("true" if rec[c] else "false") for c in COLUMNS])
            ctx.tick()
    return [name]
