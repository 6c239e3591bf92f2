"""JSON Lines: one object per caption, in position order (provenance included unless
``options["provenance"]`` is false). Also the release's manifest (``write_manifest``)."""
from __future__ import annotations

from .base import ROW_FIELDS, Context, dumps, record

BUFFER = 1 << 20


def write(ctx: Context) -> list[str]:
    with_provenance = ctx.options.get("provenance", True) is not False
    fields = ROW_FIELDS + (("provenance",) if with_provenance else ())
    name = f"{ctx.prefix}.jsonl"
    with open(ctx.out_dir / name, "w", encoding="utf-8", newline="\n", buffering=BUFFER) as out:
        for row in ctx.rows(fields=fields):
            if ctx.skip(row[2]):
                ctx.tick()
                continue
            out.write(dumps(record(row[:len(ROW_FIELDS)], ctx, row[-1] if with_provenance else None)))
            out.write("\n")
            ctx.tick()
    return [name]


def write_manifest(ctx: Context) -> list[str]:
    """The canonical manifest whose sha256 is ``Release.content_hash``."""
    from ..provenance import manifest_lines

    name = f"{ctx.prefix}-manifest.jsonl"
    with open(ctx.out_dir / name, "wb", buffering=BUFFER) as out:
        for line in manifest_lines(ctx.release):
            out.write(line)
            ctx.tick()
    return [name]
