"""Re-export and verify: write a done export's files again and show that every sha256 matches.

``run_verify`` writes the format again, with the export's own options, into a scratch folder
(the published files are never touched; every image is hashed against its sha256, even a file the
export trusted as unchanged since it last hashed right), hashes the published files in storage as they are now,
and stores on the export, file by file, the sha256 recorded when it was published, the one of the
rewrite and the one in storage. The export is verified when the three agree for every file and
neither side has a file the other lacks. A rewrite that differs means the release's rows, the
image files or the writers changed; a stored file that differs means storage lost or changed it.
"""
from __future__ import annotations

import hashlib
import logging
import tempfile
from pathlib import Path

from django.core.files.storage import default_storage
from django.utils import timezone

from releases.models import ReleaseExport

from . import ReleaseError
from .publish import storage_name

log = logging.getLogger(__name__)

BLOCK = 1 << 20
BUSY = ("queued", "running")


def stored_sha256(storage, name: str) -> str | None:
    """The sha256 of a file in storage, streamed; None when it is missing."""
    digest = hashlib.sha256()
    try:
        with storage.open(name, "rb") as fh:
            while block := fh.read(BLOCK):
                digest.update(block)
    except (FileNotFoundError, OSError):
        return None
    return digest.hexdigest()


def compare(recorded: list[dict], rewritten: list[dict], stored: dict[str, str | None]) -> list[dict]:
    """One row per file name of either list: the three hashes and whether they agree."""
    before = {f["name"]: f for f in recorded}
    after = {f["name"]: f for f in rewritten}
    rows = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name) or {}, after.get(name) or {}
        row = {"name": name, "recorded": old.get("sha256"), "rewritten": new.get("sha256"),
               "stored": stored.get(name), "size": old.get("size"), "rewritten_size": new.get("size")}
        row["match"] = bool(row["recorded"]) and row["recorded"] == row["rewritten"] == row["stored"]
        rows.append(row)
    return rows


def _save(export_id: int, verification: dict) -> None:
    ReleaseExport.objects.filter(pk=export_id).update(verification=verification)


def run_verify(export_id: int, storage=None, progress=None) -> ReleaseExport | None:
    """What the task (and ``release verify``) runs. Returns the export with its verification, or
    None when the export was deleted meanwhile."""
    from . import formats

    storage = storage or default_storage
    export = ReleaseExport.objects.select_related("release").filter(pk=export_id).first()
    if export is None:
        return None
    started = timezone.now().isoformat()
    if export.status != ReleaseExport.Status.DONE:
        _save(export.pk, {"status": "failed", "ok": False, "started_at": started, "finished_at": started,
                          "error": f"Only a done export can be verified; this one is {export.status}."})
        export.refresh_from_db()
        return export
    _save(export.pk, {"status": "running", "started_at": started})
    try:
        with tempfile.TemporaryDirectory(prefix=f"release-{export.release_id}-verify-{export.pk}-") as tmp:
            rewritten = formats.write(export.format, export.release, Path(tmp),
                                      {**(export.options or {}), "report": [], "verify_images": "always"},
                                      progress=progress)
        stored = {f["name"]: stored_sha256(storage, storage_name(export, f["name"])) for f in export.files or []}
        files = compare(export.files or [], rewritten, stored)
        verification = {"status": "done", "ok": bool(files) and all(f["match"] for f in files), "files": files,
                        "matched": sum(f["match"] for f in files), "started_at": started,
                        "finished_at": timezone.now().isoformat(), "error": ""}
    except Exception as exc:
        if not isinstance(exc, ReleaseError):
            log.exception("verifying export %s failed", export.pk)
        message = exc.message if isinstance(exc, ReleaseError) else f"{type(exc).__name__}: {exc}"
        verification = {"status": "failed", "ok": False, "started_at": started,
                        "finished_at": timezone.now().isoformat(), "error": message}
    _save(export.pk, verification)
    export.refresh_from_db()
    return export
