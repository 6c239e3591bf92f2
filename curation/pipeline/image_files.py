"""Reading an image Item's file for the image filters: whether it has one, the decision when it has
none, its bytes, its format and size (from the row, or the file's header) and a read error in words."""
from __future__ import annotations

import logging

from django.core.files.storage import default_storage
from PIL import Image as PILImage

from .base import Decision, Item, drop

log = logging.getLogger(__name__)


def has_file(item: Item) -> bool:
    return item.image_status == "ready" and bool(item.file_name)


def no_file(item: Item) -> Decision:
    return drop("no_file", status=item.image_status, file=item.file_name or None)


def read_file(name: str) -> bytes:
    with default_storage.open(name, "rb") as fh:
        return fh.read()


def probe(item: Item) -> tuple[str | None, int | None, int | None]:
    """Format and size from the Item, or from the file's header where the row lacks them."""
    if item.image_format and item.width and item.height:
        return item.image_format, item.width, item.height
    try:
        with default_storage.open(item.file_name, "rb") as fh, PILImage.open(fh) as img:
            return item.image_format or img.format, item.width or img.width, item.height or img.height
    except Exception as exc:  # noqa: BLE001 - a bad header is a decision, not a crash
        log.debug("probing %s failed: %s", item.file_name, exc)
        return item.image_format, item.width, item.height


def error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]
