"""The images of an export: each distinct image file once, streamed from storage into tar or zip
shards (``release-<id>-images-%06d.tar`` or ``.zip``) under a stable relative name,
``images/<sha256[:2]>/<sha256>.<ext>``, which the annotation files give as the image's path.
Extracting every shard into the folder of the annotation files gives the ``images/`` folder they
reference.

Images come from PostgreSQL once per distinct sha256 (``DISTINCT ON``, ordered by sha256), so the
order, and with it the bytes of every shard, is the same on every run. Each file is copied in
1 MiB blocks (never whole in memory) while its sha256 is checked against the one recorded at
freezing; the shard's own sha256 is computed as it is written (no second read). A file whose stat
(size, modification and change times, inode) still equals the token recorded when its bytes last
hashed right (``Image.file_stat``: set by the import that wrote it, or by an earlier export) is
copied without that check, as git trusts an unchanged file in its index; every other file is hashed,
and ``verify_images: "always"`` (re-export and verify) hashes them all. The two sha256 passes are
most of the CPU an image costs beyond ``tarfile``'s copy (see benchmarks/export.py). Members get fixed metadata (mtime 0 / 1980-01-01, mode 0444, owner
"captionlab"); zip members are stored (JPEG and PNG do not compress further).

An image whose file is missing from storage is left out and remembered (``ctx.missing``); the
caller skips its captions or fails with the whole list (``missing_images``). A file whose bytes no
longer match its sha256 fails the export: a shard cannot take back bytes it has written, and a
release must not ship an image other than the one it froze.
"""
from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile

from curation.ingest import file_stat

from .. import ReleaseError
from .base import CHUNK, relative_name

BLOCK = 1 << 20
ARCHIVES = ("tar", "zip")
DEFAULT_SHARD_SIZE = 1_000_000_000
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


class HashingFile:
    """A write-only file that hashes what passes through it (the shard's sha256 without reading
    it back). Not seekable, so zipfile writes data descriptors instead of seeking back."""

    def __init__(self, path):
        self.fh = open(path, "wb", buffering=BLOCK)
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data) -> int:
        self.fh.write(data)
        self.digest.update(data)
        self.size += len(data)
        return len(data)

    def tell(self) -> int:
        return self.size

    def seek(self, *args):
        raise io.UnsupportedOperation("a hashing shard is written front to back")

    def seekable(self) -> bool:
        return False

    def flush(self) -> None:
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()


class HashingReader:
    """Reads a source file while hashing it (the copy loop calls ``read``)."""

    def __init__(self, fh):
        self.fh = fh
        self.digest = hashlib.sha256()
        self.size = 0

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n)
        self.digest.update(data)
        self.size += len(data)
        return data


def check(source: HashingReader, sha: str, image_id, file: str) -> None:
    """The bytes just copied are the image the release froze, or the export fails."""
    if (found := source.digest.hexdigest()) != sha:
        raise ReleaseError(
            f"Image #{image_id} ({file}) no longer matches the sha256 recorded when the release was frozen "
            f"({sha[:12]}…; the file in storage hashes to {found[:12]}…): the release cannot ship it. "
            "Restore the file or freeze a new release.", "images")


def add_member(tar: tarfile.TarFile, info: tarfile.TarInfo, source) -> None:
    """``tar.addfile``, without the TarInfo that ``tarfile`` keeps for every member it writes: a writer
    never reads them back, and a release of millions of images would hold a kilobyte per member until
    the shard closes. The bytes written are the same."""
    tar.addfile(info, source)
    tar.members.clear()


def file_size(fh) -> int:
    size = getattr(fh, "size", None)  # Django's File (local and S3) knows it without reading
    if isinstance(size, int):
        return size
    here = fh.tell()
    size = fh.seek(0, io.SEEK_END)
    fh.seek(here)
    return size


class Shards:
    """Tar or zip shards named ``pattern % n``; a new shard starts past ``maxsize`` bytes."""

    def __init__(self, ctx, archive: str, maxsize: int):
        self.ctx, self.archive, self.maxsize = ctx, archive, maxsize
        self.pattern = f"{ctx.prefix}-images-%06d.{archive}"
        self.names: list[str] = []
        self.out = self.pack = None
        self.size = 0

    def _next(self) -> None:
        self.finish()
        name = self.pattern % len(self.names)
        self.names.append(name)
        self.out = HashingFile(self.ctx.out_dir / name)
        if self.archive == "tar":
            self.pack = tarfile.open(fileobj=self.out, mode="w", format=tarfile.USTAR_FORMAT)
            self.pack.copybufsize = BLOCK
        else:
            self.pack = zipfile.ZipFile(self.out, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True)
        self.size = 0

    def add(self, name: str, source, size: int) -> None:
        if self.pack is None or self.size >= self.maxsize:
            self._next()
        if self.archive == "tar":
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = size, 0, 0o444
            info.uid = info.gid = 0
            info.uname = info.gname = "captionlab"
            add_member(self.pack, info, source)
        else:
            info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = 0o100444 << 16
            info.create_system = 3
            info.file_size = size
            with self.pack.open(info, "w") as member:
                while block := source.read(BLOCK):
                    member.write(block)
        self.size += size

    def finish(self) -> None:
        if self.pack is not None:
            self.pack.close()
            self.out.close()
            self.ctx.hashed[self.names[-1]] = {"name": self.names[-1], "size": self.out.size,
                                               "sha256": self.out.digest.hexdigest()}
            self.pack = self.out = None

    def close(self) -> list[str]:
        self.finish()
        return self.names

    def abort(self) -> None:
        """Stop after an error: close the open file (the caller's staging folder goes away)."""
        if self.out is not None:
            self.out.fh.close()


def distinct_images(ctx):
    """(sha256, file, format, image id, first position, the image's current sha256, file and
    file_stat) per distinct image, by sha256."""
    from releases.models import ReleaseItem

    return (ReleaseItem.objects.filter(release=ctx.release).order_by("image_sha256", "position")
            .distinct("image_sha256")
            .values_list("image_sha256", "image_file", "image_format", "image_id", "position",
                         "image__sha256", "image__file", "image__file_stat")
            .iterator(chunk_size=CHUNK))


class CountingReader:
    """Reads a source file that needs no hashing (``trusted``), counting its bytes."""

    def __init__(self, fh):
        self.fh = fh
        self.size = 0

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n)
        self.size += len(data)
        return data


class StatLedger:
    """Tokens (``curation.ingest.file_stat``) of the files an export hashed and found right, written
    to their images in batches, so the next export of them copies without hashing."""

    def __init__(self):
        self.pending: dict[int, str] = {}

    def add(self, image_id: int, token: str) -> None:
        self.pending[image_id] = token
        if len(self.pending) >= CHUNK:
            self.flush()

    def flush(self) -> None:
        """One UPDATE ... FROM (VALUES ...) per batch (Django's bulk_update builds a CASE per row)."""
        from django.db import connection

        from curation.models import Image

        if self.pending and connection.vendor != "postgresql":  # the embedded SQLite default
            Image.objects.bulk_update([Image(pk=pk, file_stat=t) for pk, t in self.pending.items()], ["file_stat"])
            self.pending.clear()
        if self.pending:
            values = ", ".join(["(%s, %s)"] * len(self.pending))
            with connection.cursor() as cursor:
                cursor.execute(f"UPDATE {Image._meta.db_table} AS i SET file_stat = v.stat "  # noqa: S608 - placeholders
                               f"FROM (VALUES {values}) AS v(id, stat) WHERE i.id = v.id",
                               [x for pair in self.pending.items() for x in pair])
            self.pending.clear()


def trusted(ctx, token: str | None, recorded: str | None) -> bool:
    """The file is the one the image's token was taken from, unchanged since: no need to hash it.
    ``verify_images: "always"`` (the re-export and verify action) hashes every image."""
    return ctx.options.get("verify_images") != "always" and token is not None and bool(recorded) \
        and recorded == token


def write(ctx) -> list[str]:
    """Write the image shards; fill ``ctx.missing`` with the images that could not be read."""
    archive = ctx.options.get("image_archive", "tar")
    if archive not in ARCHIVES:
        raise ReleaseError(f"image_archive must be one of {', '.join(ARCHIVES)}.", "image_archive")
    maxsize = ctx.options.get("shard_size", DEFAULT_SHARD_SIZE)
    if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
        raise ReleaseError("shard_size must be a positive whole number.", "shard_size")
    shards = Shards(ctx, archive, maxsize)
    ledger = StatLedger()
    try:
        for sha, file, fmt, image_id, position, *current in distinct_images(ctx):
            _add(ctx, shards, ledger, sha, file, fmt, image_id, position, tuple(current))
        ledger.flush()
    except BaseException:
        shards.abort()
        raise
    return shards.close()


def _add(ctx, shards: Shards, ledger: StatLedger, sha: str, file: str, fmt: str, image_id, position: int,
         current: tuple) -> None:
    if not file:
        ctx.image_missing(sha, position, image_id, file, "has no file")
        return
    try:
        fh = ctx.open_image(file)
    except Exception as exc:  # noqa: BLE001 - local FileNotFoundError, S3 ClientError 404, ...
        ctx.image_missing(sha, position, image_id, file, f"is missing from storage ({type(exc).__name__})")
        return
    # The image row still describes this file (the release's frozen sha256 and name): its token applies.
    image_sha, image_file, image_stat = current
    ours = image_id is not None and image_sha == sha and image_file == file
    with fh:
        token = file_stat.of_handle(fh)
        skip_hash = ours and trusted(ctx, token, image_stat)
        source = CountingReader(fh) if skip_hash else HashingReader(fh)
        shards.add(relative_name(sha, fmt, file), source, file_size(fh))
    if skip_hash:
        ctx.images_trusted += 1
    else:
        check(source, sha, image_id, file)
        if ours and token is not None and token != image_stat:
            ledger.add(image_id, token)
    ctx.images_written += 1
    ctx.image_bytes += source.size
