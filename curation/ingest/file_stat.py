"""The stat of a stored image file, as a token recorded when its bytes are known to hash to the image's
sha256 (``Image.file_stat``): written by an import, or hashed by an export.

An export trusts a file whose stat still equals the token and copies it without hashing it again; any
other file is hashed and checked (and its token recorded). The token is what git's index keeps to tell an
unchanged file without reading it: size, modification time and inode change time in nanoseconds, and
inode. A write, a truncation, a restore from backup, a rename or a chmod changes at least one of them
(the change time cannot be set back from user space). What it cannot see is bytes that change with no
write through the file system (bit rot on the disk): "re-export and verify" hashes every image whatever
its token says. Storage without local files (S3) has no token: every export hashes its images."""
from __future__ import annotations

import io
import os


def token(st: os.stat_result) -> str:
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"


def of_handle(fh) -> str | None:
    """The token of an open file (a Django File over a local file, or a plain file), None without one."""
    try:
        return token(os.fstat(fh.fileno()))
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


def of_stored(name: str, storage=None) -> str | None:
    """The token of a file in storage (default storage), None where storage has no local path."""
    if storage is None:
        from django.core.files.storage import default_storage as storage
    try:
        return token(os.stat(storage.path(name)))
    except (NotImplementedError, OSError, ValueError):
        return None
