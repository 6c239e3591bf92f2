"""Image bytes: verification, storage, thumbnails, and safe iteration over folders and zip files."""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Iterator

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from PIL import Image as PILImage
from PIL import UnidentifiedImageError

from ..models import Image
from .file_stat import of_stored
from .report import RowError

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff"}
# Archive clutter that is not content: skipped without a report line.
IGNORED_PARTS = {"__MACOSX", ".DS_Store", "Thumbs.db"}

# Pillow's decompression-bomb limit stays on (Image.MAX_IMAGE_PIXELS, 89.5 Mpx by default); we
# only make its warning zone an error too, so a 100 Mpx image is refused rather than decoded.
assert PILImage.MAX_IMAGE_PIXELS, "Pillow's pixel limit must stay on"


@dataclass
class VerifiedImage:
    data: bytes
    sha256: str
    format: str
    width: int
    height: int


def verify_image(data: bytes) -> VerifiedImage:
    """Check that ``data`` is a whole, decodable image of a supported format within the pixel limit."""
    if not data:
        raise RowError("empty_file", "the file is empty")
    if len(data) > settings.INGEST_MAX_IMAGE_BYTES:
        raise RowError("too_large", f"image is {len(data)} bytes; the limit is {settings.INGEST_MAX_IMAGE_BYTES}")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PILImage.DecompressionBombWarning)
        try:
            with PILImage.open(io.BytesIO(data)) as probe:
                fmt = probe.format
                probe.verify()
            if fmt not in Image.FORMATS:
                raise RowError("unsupported_format", f"{fmt} images are not accepted")
            # verify() does not decode pixels: load() does, and catches truncated files.
            with PILImage.open(io.BytesIO(data)) as img:
                img.load()
                width, height = img.size
        except (PILImage.DecompressionBombError, PILImage.DecompressionBombWarning) as exc:
            raise RowError("decompression_bomb", f"refused as a decompression bomb: {exc}") from None
        except UnidentifiedImageError:
            raise RowError("not_an_image", "the file is not an image Pillow can read") from None
        except RowError:
            raise
        except (OSError, SyntaxError, ValueError, EOFError) as exc:
            message = str(exc) or type(exc).__name__
            code = "truncated_image" if "truncated" in message.lower() or isinstance(exc, EOFError) else "corrupt_image"
            raise RowError(code, f"the image cannot be decoded: {message}") from None
    return VerifiedImage(data=data, sha256=hashlib.sha256(data).hexdigest(), format=fmt, width=width, height=height)


def store_image_file(image: Image, verified: VerifiedImage) -> None:
    """Fill ``image`` (unsaved fields) with the verified file: content-addressed path and thumbnail."""
    image.sha256 = verified.sha256
    image.format = verified.format
    image.width, image.height = verified.width, verified.height
    image.file_size = len(verified.data)
    path = f"images/{verified.sha256[:2]}/{verified.sha256}.{image.extension}"
    if not default_storage.exists(path):
        path = default_storage.save(path, ContentFile(verified.data))
        image.file_stat = of_stored(path) or ""  # just written from bytes that hash to sha256
    image.file.name = path
    thumb_path = f"thumbs/{verified.sha256[:2]}/{verified.sha256}.jpg"
    if not default_storage.exists(thumb_path):
        thumb_path = default_storage.save(thumb_path, ContentFile(make_thumbnail(verified.data)))
    image.thumbnail.name = thumb_path
    image.status = Image.Status.READY
    image.error = ""


def make_thumbnail(data: bytes) -> bytes:
    with PILImage.open(io.BytesIO(data)) as img:
        img.seek(0)
        img = img.convert("RGB")
        img.thumbnail((settings.THUMBNAIL_SIZE, settings.THUMBNAIL_SIZE))
        out = io.BytesIO()
        img.save(out, "JPEG", quality=82, optimize=True)
        return out.getvalue()


@dataclass
class Member:
    """One file of a folder or archive: its 1-based position, its safe relative name, and a reader."""

    index: int
    name: str
    size: int
    read: callable  # () -> bytes, reads at most the size cap + 1 bytes


def safe_relative_name(raw: str) -> str:
    """A normalised relative POSIX path, or a RowError for absolute paths and ``..`` (zip slip)."""
    name = raw.replace("\\", "/")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise RowError("unsafe_path", f"absolute path {raw!r} in archive refused")
    parts = PurePosixPath(name).parts
    if any(part == ".." for part in parts):
        raise RowError("unsafe_path", f"path {raw!r} climbs out of the archive (zip slip); refused")
    return str(PurePosixPath(*[p for p in parts if p not in ("", ".")]))


def _is_ignored(name: str) -> bool:
    return any(part in IGNORED_PARTS or part.startswith("._") for part in PurePosixPath(name).parts)


@contextlib.contextmanager
def open_members(path: str | Path):
    """The members of a folder or zip file, as a list, readable while the context is open."""
    path = Path(path)
    if path.is_dir():
        yield list(iter_folder(path))
    elif path.suffix.lower() == ".zip":
        try:
            archive = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as exc:
            raise RowError("bad_archive", f"not a readable zip file: {exc}") from None
        with archive:
            yield list(iter_zip(archive))
    else:
        raise RowError("bad_archive", f"{path.name} is neither a folder nor a .zip file")


def iter_zip(archive: zipfile.ZipFile) -> Iterator[Member | tuple[int, str, RowError]]:
    cap = settings.INGEST_MAX_IMAGE_BYTES
    infos = [info for info in archive.infolist() if not info.is_dir()]
    if len(infos) > settings.INGEST_MAX_ZIP_MEMBERS:
        raise RowError("bad_archive", f"archive has {len(infos)} files; the limit is {settings.INGEST_MAX_ZIP_MEMBERS}")
    for index, info in enumerate(infos, start=1):
        try:
            name = safe_relative_name(info.filename)
        except RowError as exc:
            yield (index, info.filename, exc)
            continue
        if _is_ignored(name):
            continue

        def read(info=info):
            # Read through the decompressor with a cap: a zip bomb's header can lie about size.
            with archive.open(info) as fh:
                data = fh.read(cap + 1)
            if len(data) > cap:
                raise RowError("too_large", f"file is larger than the {cap}-byte limit")
            return data

        yield Member(index=index, name=name, size=info.file_size, read=read)


def iter_folder(path: str | Path) -> Iterator[Member | tuple[int, str, RowError]]:
    root = Path(path).resolve()
    cap = settings.INGEST_MAX_IMAGE_BYTES
    index = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for filename in sorted(filenames):
            full = Path(dirpath) / filename
            name = full.relative_to(root).as_posix()
            if _is_ignored(name):
                continue
            index += 1
            if full.is_symlink():
                yield (index, name, RowError("unsafe_path", "symbolic links are not followed"))
                continue

            def read(full=full):
                with open(full, "rb") as fh:
                    data = fh.read(cap + 1)
                if len(data) > cap:
                    raise RowError("too_large", f"file is larger than the {cap}-byte limit")
                return data

            yield Member(index=index, name=name, size=full.stat().st_size, read=read)
