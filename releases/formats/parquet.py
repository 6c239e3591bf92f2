"""Parquet that Hugging Face ``datasets.load_dataset("parquet", data_files=...)`` loads: one file,
row groups of ``options["row_group_size"]`` rows (default 20,000) written with
``pyarrow.parquet.ParquetWriter``. Columns: position, image_id, image_sha256, file, width,
height, split, caption, caption_id, license, credit, external_id, language, human_verified and
provenance (a JSON string). Fixed settings (snappy, dictionary encoding, statistics, format 2.6)
so the same release gives the same bytes; pyarrow's only varying metadata is its version string."""
from __future__ import annotations

from .. import ReleaseError
from .base import ROW_FIELDS, Context, dumps, record

COLUMNS = ("position", "image_id", "image_sha256", "file", "width", "height", "split", "caption", "caption_id",
           "license", "credit", "external_id", "language", "human_verified", "provenance")


def schema():
    import pyarrow as pa

    return pa.schema([
        ("position", pa.int64()), ("image_id", pa.int64()), ("image_sha256", pa.string()), ("file", pa.string()),
        ("width", pa.int32()), ("height", pa.int32()), ("split", pa.string()), ("caption", pa.string()),
        ("caption_id", pa.int64()), ("license", pa.string()), ("credit", pa.string()),
        ("external_id", pa.string()), ("language", pa.string()), ("human_verified", pa.bool_()),
        ("provenance", pa.string()),
    ])


def write(ctx: Context) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    size = ctx.options.get("row_group_size", 20000)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ReleaseError("row_group_size must be a positive whole number.", "row_group_size")
    name = f"{ctx.prefix}.parquet"
    sch = schema()
    columns = {c: [] for c in COLUMNS}

    def flush(writer):
        if columns["position"]:
            writer.write_table(pa.Table.from_pydict(columns, schema=sch), row_group_size=size)
            for values in columns.values():
                values.clear()

    with pq.ParquetWriter(ctx.out_dir / name, sch, compression="snappy", use_dictionary=True,
                          write_statistics=True, version="2.6", data_page_version="1.0",
                          store_schema=True) as writer:
        for row in ctx.rows(fields=ROW_FIELDS + ("provenance",)):
            if ctx.skip(row[2]):
                ctx.tick()
                continue
            rec = record(row[:len(ROW_FIELDS)], ctx)
            for column in COLUMNS[:-1]:
                columns[column].append(rec["file" if column == "file" else column])
            columns["provenance"].append(dumps(row[-1]))
            ctx.tick()
            if len(columns["position"]) >= size:
                flush(writer)
        flush(writer)
    return [name]
