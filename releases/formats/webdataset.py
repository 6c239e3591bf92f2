"""WebDataset tar shards (``release-<id>-%06d.tar``).

Written with the standard library's tarfile, the way ``webdataset.ShardWriter`` writes them (a
sample's members are ``<key>.<ext>`` in sorted extension order; a new shard starts when the current
one reached ``samples_per_shard`` samples or ``shard_size`` bytes of payload), without importing
the webdataset package, which imports torch (~150 MB and seconds per worker process). The shards
read back with ``webdataset.WebDataset``.

One sample per image and split (an image of a human-verified test split with other captions in
train has a sample in each): key = the zero-padded position of its first item; the image bytes
under their extension (jpg, png, ...) and ``json`` with the image facts and its captions (its
``file`` names the image member, ``<key>.<ext>``). With ``options["images"] == "none"`` a sample
holds the ``json`` only and ``file`` is the image's storage name (the export manifest names the
storage). An image missing from storage: its sample is left out (``missing_images: skip``) or
the export fails with the list of every missing file (``fail``). Shard
size: ``options["shard_size"]`` (bytes, default 1 GB) and ``options["samples_per_shard"]``
(default 10,000). Tar members get fixed metadata (mtime 0, uid/gid 0, user and group
"captionlab", mode 0444), so the shards are byte-identical on every run."""
from __future__ import annotations

import io
import posixpath
import tarfile

from .. import ReleaseError
from .base import Context, dumps, extension
from .images import BLOCK, HashingFile, HashingReader, add_member, check, file_size

FIELDS = ("position", "split", "provenance__image", "image_sha256", "image_file", "image_format", "width",
          "height", "license", "credit", "external_id", "provenance__caption", "text", "language",
          "human_verified")


def _positive(ctx: Context, key: str, default: int) -> int:
    value = ctx.options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ReleaseError(f"{key} must be a positive whole number.", key)
    return value


def _extension(fmt: str, file: str) -> str:
    return extension(fmt, file)


class ShardWriter:
    """Tar shards named ``pattern % n`` with fixed member metadata (reproducible bytes), each
    hashed as it is written (``hashed``: name -> file entry). A member is bytes, or a
    ``(reader, size)`` pair copied in 1 MiB blocks (an image is never whole in memory)."""

    def __init__(self, pattern: str, maxcount: int, maxsize: int, hashed: dict | None = None):
        self.pattern, self.maxcount, self.maxsize = pattern, maxcount, maxsize
        self.hashed = hashed if hashed is not None else {}
        self.names: list[str] = []
        self.tar = self.out = None
        self.count = self.size = 0

    def _next(self) -> None:
        self.finish()
        name = self.pattern % len(self.names)
        self.names.append(posixpath.basename(name))
        self.out = HashingFile(name)
        self.tar = tarfile.open(fileobj=self.out, mode="w", format=tarfile.USTAR_FORMAT)
        self.tar.copybufsize = BLOCK
        self.count = self.size = 0

    def write(self, sample: dict) -> None:
        if self.tar is None or self.count >= self.maxcount or self.size >= self.maxsize:
            self._next()
        key = sample["__key__"]
        for ext in sorted(k for k in sample if not k.startswith("_")):
            member = sample[ext]
            source, size = (io.BytesIO(member), len(member)) if isinstance(member, bytes) else member
            info = tarfile.TarInfo(f"{key}.{ext}")
            info.size, info.mtime, info.mode = size, 0, 0o444
            info.uid = info.gid = 0
            info.uname = info.gname = "captionlab"
            add_member(self.tar, info, source)
            self.size += size
        self.count += 1

    def finish(self) -> None:
        if self.tar is not None:
            self.tar.close()
            self.out.close()
            self.hashed[self.names[-1]] = {"name": self.names[-1], "size": self.out.size,
                                           "sha256": self.out.digest.hexdigest()}
            self.tar = self.out = None

    def close(self) -> list[str]:
        if not self.names:  # an export with no sample still gets one (empty) shard
            self._next()
        self.finish()
        return self.names

    def abort(self) -> None:
        """Stop after an error: close the open file (the caller's staging folder goes away)."""
        if self.out is not None:
            self.out.fh.close()


def write(ctx: Context) -> list[str]:
    shard_size = _positive(ctx, "shard_size", 1_000_000_000)
    per_shard = _positive(ctx, "samples_per_shard", 10_000)
    sink = ShardWriter(str(ctx.out_dir / f"{ctx.prefix}-%06d.tar"), per_shard, shard_size, ctx.hashed)
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
    except BaseException:
        sink.abort()
        raise
    return sink.close()


def _sample(ctx: Context, sink, rows: list[tuple]) -> None:
    (position, split, image_id, sha, file, fmt, width, height, lic, credit, external_id) = rows[0][:11]
    key = f"{position:09d}"
    sample = {"__key__": key}
    fh = None
    if ctx.with_images:
        fh = _open(ctx, position, image_id, sha, file)
        if fh is None:
            ctx.captions_skipped += len(rows)
            return
        ext = _extension(fmt, file)
        source = HashingReader(fh)
        sample[ext] = (source, file_size(fh))
        file = f"{key}.{ext}"
    meta = {"image_id": image_id, "image_sha256": sha, "file": file, "split": split, "width": width,
            "height": height, "license": ctx.clean(lic, position, "license"),
            "credit": ctx.clean(credit, position, "credit"),
            "external_id": ctx.clean(external_id, position, "external_id"),
            "captions": [{"position": r[0], "caption_id": r[11], "caption": ctx.clean(r[12], r[0], "caption"),
                          "language": r[13], "human_verified": r[14]} for r in rows]}
    sample["json"] = dumps(meta).encode("utf-8")
    if fh is None:
        sink.write(sample)
        return
    with fh:
        sink.write(sample)
    check(source, sha, image_id, rows[0][4])
    ctx.images_written += 1
    ctx.image_bytes += source.size


def _open(ctx: Context, position: int, image_id, sha: str, file: str):
    """The image file opened for reading, or None when it is missing (reported once)."""
    if sha in ctx.missing:
        return None
    if not file:
        ctx.image_missing(sha, position, image_id, file, "has no file")
        return None
    try:
        return ctx.open_image(file)
    except Exception as exc:
        if isinstance(exc, ReleaseError):
            raise
        ctx.image_missing(sha, position, image_id, file, f"is missing from storage ({type(exc).__name__})")
        return None
