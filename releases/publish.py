"""Writing an export and publishing its files to storage, never half a file.

The format writer fills a temporary folder. Each file is then copied to storage under
``releases/<release id>/<export id>/<name>.partial``; only when every copy is complete are they
renamed to their final names and the export marked done with its files, sizes and hashes. A
worker killed at any point leaves at most ``.partial`` files (or a few final names of an export
that is still "running", never marked done); the redelivered task (acks_late) deletes whatever
the export had in storage and starts again from scratch. The writers are deterministic, so the
restarted export gives the same bytes.
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from releases.models import ReleaseExport

from . import ReleaseError
from .progress import Throttled

log = logging.getLogger(__name__)

PARTIAL = ".partial"


def mark_attempt(export_id: int) -> None:
    ReleaseExport.objects.filter(pk=export_id).update(
        attempts=F("attempts") + 1, status=ReleaseExport.Status.RUNNING, rows_done=0, error="",
        files=[], sha256="", size=0, report=[], finished_at=None, verification={})


def export_prefix(export: ReleaseExport) -> str:
    return f"releases/{export.release_id}/{export.pk}/"


def storage_name(export: ReleaseExport, name: str) -> str:
    return export_prefix(export) + name


def _walk(storage, prefix: str) -> list[str]:
    """Every file name under ``prefix`` in storage (recursively), or [] when there is none."""
    try:
        dirs, files = storage.listdir(prefix.rstrip("/"))
    except (FileNotFoundError, NotADirectoryError):
        return []
    names = [prefix + f for f in files]
    for d in dirs:
        names.extend(_walk(storage, f"{prefix}{d}/"))
    return names


def stored_files(export: ReleaseExport, storage=None) -> list[str]:
    return sorted(_walk(storage or default_storage, export_prefix(export)))


def clear(export: ReleaseExport, storage=None) -> int:
    """Delete everything the export has in storage (partial or final). Returns how many files."""
    storage = storage or default_storage
    names = _walk(storage, export_prefix(export))
    for name in names:
        storage.delete(name)
    return len(names)


def rename_stored(storage, src: str, dst: str) -> None:
    """Move ``src`` to ``dst`` within storage: an atomic rename on a local disk, a server-side copy
    then delete on S3, and a copy through the storage API elsewhere."""
    try:
        os.replace(storage.path(src), storage.path(dst))
        return
    except NotImplementedError:
        pass
    bucket = getattr(storage, "bucket", None)
    normalise = getattr(storage, "_normalize_name", None)
    if bucket is not None and normalise is not None:
        from storages.utils import clean_name

        src_key, dst_key = normalise(clean_name(src)), normalise(clean_name(dst))
        bucket.Object(dst_key).copy_from(CopySource={"Bucket": bucket.name, "Key": src_key})
        storage.delete(src)
        return
    with storage.open(src, "rb") as fh:
        saved = storage.save(dst, fh)
    storage.delete(src)
    if saved != dst:
        raise ReleaseError(f"storage saved {dst} as {saved}", "storage")


def copy_to_storage(storage, local: Path, name: str) -> None:
    """Copy one local file to storage as ``name`` (which must not exist: the export was cleared)."""
    with open(local, "rb") as fh:
        saved = storage.save(name, File(fh, name=os.path.basename(name)))
    if saved != name:
        storage.delete(saved)
        raise ReleaseError(f"storage refused the name {name} (it gave {saved})", "storage")


def combined_sha256(files: list[dict]) -> str:
    """The hash of an export: the file's own for one file, else that of the sorted shard list."""
    if len(files) == 1:
        return files[0]["sha256"]
    listing = "".join(f"{f['sha256']}  {f['name']}\n" for f in sorted(files, key=lambda f: f["name"]))
    return hashlib.sha256(listing.encode("utf-8")).hexdigest()


def open_stored(name: str, mode: str = "rb"):
    return default_storage.open(name, mode)


def run_export(export_id: int, storage=None, echo=None) -> ReleaseExport | None:
    """Write the export and publish it. Idempotent: a done export is left alone; anything else
    starts from scratch (leftovers of a killed attempt are deleted first). None when the export
    was deleted before its task ran."""
    from . import formats

    storage = storage or default_storage
    export = ReleaseExport.objects.select_related("release").filter(pk=export_id).first()
    if export is None:
        return None
    if export.status == ReleaseExport.Status.DONE:
        return export
    removed = clear(export, storage)
    if removed:
        log.warning("export %s: removed %s leftover file(s) of an earlier attempt", export.pk, removed)
    mark_attempt(export.pk)
    release = export.release
    progress = Throttled(ReleaseExport, export.pk, "rows_done", "rows_total", echo)
    options = {**(export.options or {}), "report": []}
    try:
        with tempfile.TemporaryDirectory(prefix=f"release-{release.pk}-export-{export.pk}-") as tmp:
            out_dir = Path(tmp)
            files = formats.write(export.format, release, out_dir, options, progress=progress,
                                  storage_open=open_stored)
            files = sorted(files, key=lambda f: f["name"])
            for entry in files:  # every file complete in storage, under its partial name
                copy_to_storage(storage, out_dir / entry["name"], storage_name(export, entry["name"]) + PARTIAL)
            for entry in files:  # then, and only then, the final names
                rename_stored(storage, storage_name(export, entry["name"]) + PARTIAL, storage_name(export, entry["name"]))
    except Exception as exc:
        message = exc.message if isinstance(exc, ReleaseError) else f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, ReleaseError):
            log.exception("export %s failed", export.pk)
        clear(export, storage)
        ReleaseExport.objects.filter(pk=export.pk).update(
            status=ReleaseExport.Status.FAILED, error=message, report=options.get("report") or [],
            finished_at=timezone.now())
        export.refresh_from_db()
        return export
    with transaction.atomic():
        ReleaseExport.objects.filter(pk=export.pk).update(
            status=ReleaseExport.Status.DONE, files=files, sha256=combined_sha256(files),
            size=sum(int(f["size"]) for f in files), report=options.get("report") or [],
            rows_done=F("rows_total"), finished_at=timezone.now(), error="")
    export.refresh_from_db()
    return export


def open_local(export: ReleaseExport, name: str, storage=None):
    """The published file ``name`` of a done export, opened for reading."""
    storage = storage or default_storage
    return storage.open(storage_name(export, name), "rb")


def copy_out(export: ReleaseExport, out_dir: Path, storage=None) -> list[Path]:
    """Copy a done export's files into a local folder (the command's ``--out``)."""
    storage = storage or default_storage
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for entry in export.files:
        target = out_dir / entry["name"]
        target.parent.mkdir(parents=True, exist_ok=True)
        with storage.open(storage_name(export, entry["name"]), "rb") as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst, 1024 * 1024)
        written.append(target)
    return written
