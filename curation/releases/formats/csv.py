"""CSV: a header, then one row per caption in position order.

Against formula injection every text cell starting with =, +, -, @, a tab or a carriage return
gets a leading apostrophe, so a spreadsheet shows it as text instead of evaluating it. Line
breaks inside captions are kept, in a quoted cell (the csv module quotes them)."""
from __future__ import annotations

import csv as _csv

from . import Context, record

COLUMNS = ("position", "split", "image_id", "image_sha256", "file", "width", "height", "caption_id", "caption",
           "language", "license", "credit", "external_id", "human_verified")
RISKY = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value):
    if isinstance(value, str) and value.startswith(RISKY):
        return "'" + value
    return value


def write(ctx: Context) -> list[str]:
    name = f"{ctx.prefix}.csv"
    with open(ctx.out_dir / name, "w", encoding="utf-8", newline="", buffering=1 << 20) as out:
        writer = _csv.writer(out, lineterminator="\r\n", quoting=_csv.QUOTE_MINIMAL)
        writer.writerow(COLUMNS)
        for row in ctx.rows():
            rec = record(row, ctx)
            writer.writerow([neutralise("" if rec[c] is None else rec[c]) if c != "human_verified"
                             else ("true" if rec[c] else "false") for c in COLUMNS])
            ctx.tick()
    return [name]
