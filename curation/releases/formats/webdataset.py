"""WebDataset tar shards (``release-<id>-%06d.tar``).

Written with the standard library's tarfile, the way ``webdataset.ShardWriter`` writes them (a
sample's members are ``<key>.<ext>`` in sorted extension order; a new shard starts when the current
one reached ``samples_per_shard`` samples or ``shard_size`` bytes of payload), without importing
the webdataset package, which imports torch (~150 MB and seconds per worker process). The shards
read back with ``webdataset.WebDataset``.

One sample per image and split (an image of a human-verified test split with other captions in
train has a sample in each): key = the zero-padded position of its first item; the image bytes
under their extension (jpg, png, ...) and ``json`` with the image facts and its captions. Shard
size: ``options["shard_size"]`` (bytes, default 1 GB) and ``options["samples_per_shard"]``
(default 10,000). Tar members get fixed metadata (mtime 0, uid/gid 0, user and group
"captionlab", mode 0444), so the shards are byte-identical on every run."""
from __future__ import annotations

import io
import posixpath
import tarfile

from .. import ReleaseError
from . import EXTENSIONS, Context, dumps

FIELDS = ("position", "split", "provenance__image", "image_sha256", "image_file", "image_format", "width",
          "height", "license", "credit", "external_id", "provenance__caption", "text", "language",
          "human_verified")


def _positive(ctx: Context, key: str, default: int) -> int:
    value = ctx.options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ReleaseError(f"{key} must be a positive whole number.", key)
    return value


def _extension(fmt: str, file: str) -> str:
    ext = EXTENSIONS.get(fmt) or posixpath.splitext(file)[1].lstrip(".").lower()
    return ext if ext.isalnum() else "bin"


class ShardWriter:
    """Tar shards named ``pattern % n`` with fixed member metadata (reproducible bytes)."""

    def __init__(self, pattern: str, maxcount: int, maxsize: int):
        self.pattern, self.maxcount, self.maxsize = pattern, maxcount, maxsize
        self.names: list[str] = []
        self.tar = None
        self.count = self.size = 0

    def _next(self) -> None:
        self.finish()
        name = self.pattern % len(self.names)
        self.names.append(posixpath.basename(name))
        self.tar = tarfile.open(name, mode="w", format=tarfile.USTAR_FORMAT)
        self.count = self.size = 0

    def write(self, sample: dict) -> None:
        if self.tar is None or self.count >= self.maxcount or self.size >= self.maxsize:
            self._next()
        key = sample["__key__"]
        for ext in sorted(k for k in sample if not k.startswith("_")):
            data = sample[ext]
            info = tarfile.TarInfo(f"{key}.{ext}")
            info.size, info.mtime, info.mode = len(data), 0, 0o444
            info.uid = info.gid = 0
            info.uname = info.gname = "captionlab"
            self.tar.addfile(info, io.BytesIO(data))
            self.size += len(data)
        self.count += 1

    def finish(self) -> None:
        if self.tar is not None:
            self.tar.close()
            self.tar = None

    def close(self) -> list[str]:
        if not self.names:  # an export with no sample still gets one (empty) shard
            self._next()
        self.finish()
        return self.names


def write(ctx: Context) -> list[str]:
    shard_size = _positive(ctx, "shard_size", 1_000_000_000)
    per_shard = _positive(ctx, "samples_per_shard", 10_000)
    sink = ShardWriter(str(ctx.out_dir / f"{ctx.prefix}-%06d.tar"), per_shard, shard_size)
    try:
        group: list[tuple] = []
        for row in ctx.rows(fields=FIELDS):
            if group and (row[2] != group[0][2] or row[1] != group[0][1]):
                _sample(ctx, sink, group)
                group = []
            group.append(row)
            ctx.tick()
        if group:
            _sample(ctx, sink, group)
    finally:
        names = sink.close()
    return names


def _sample(ctx: Context, sink, rows: list[tuple]) -> None:
    (position, split, image_id, sha, file, fmt, width, height, lic, credit, external_id) = rows[0][:11]
    if not file:
        ctx.missing_image(position, image_id, file, "has no file")
        return
    try:
        with ctx.open_image(file) as fh:
            data = fh.read()
    except Exception as exc:  # noqa: BLE001 - local FileNotFoundError, S3 ClientError 404, ...
        if isinstance(exc, ReleaseError):
            raise
        ctx.missing_image(position, image_id, file, f"is missing from storage ({type(exc).__name__})")
        return
    meta = {"image_id": image_id, "image_sha256": sha, "file": file, "split": split, "width": width,
            "height": height, "license": ctx.clean(lic, position, "license"),
            "credit": ctx.clean(credit, position, "credit"),
            "external_id": ctx.clean(external_id, position, "external_id"),
            "captions": [{"position": r[0], "caption_id": r[11], "caption": ctx.clean(r[12], r[0], "caption"),
                          "language": r[13], "human_verified": r[14]} for r in rows]}
    sink.write({"__key__": f"{position:09d}", _extension(fmt, file): data,
                "json": dumps(meta).encode("utf-8")})
