"""What pages, the API, the command and the tasks call to make releases and their exports.

``release_create`` validates a configuration (through the library's ``validate_config``) and
stores a queued release; ``release_freeze`` queues its freezing; ``export_create`` asks for one
format of a frozen release, reusing a finished export of the same format and options.
The work itself runs in ``run_freeze`` and ``publish.run_export``, called by the Celery tasks.
"""
from __future__ import annotations

import logging

from django.db import IntegrityError, transaction

from captionlab import tasks
from releases.models import Release, ReleaseExport, ReleaseItem

from . import ReleaseError
from .progress import Throttled

log = logging.getLogger(__name__)

MAX_NAME = 200
# WebDataset shards: samples (images) per tar file, and bytes per tar file.
SAMPLES_PER_SHARD_MIN, SAMPLES_PER_SHARD_MAX = 1, 1_000_000
SHARD_BYTES_MIN, SHARD_BYTES_MAX = 1024, 100 * 1024**3


def _user(user):
    return user if (user is not None and getattr(user, "is_authenticated", False)) else None


def release_create(name: str, config: dict, user=None, *, description: str = "", freeze: bool = False) -> Release:
    """A queued release of ``config`` (validated and normalised); with ``freeze`` it is queued
    for freezing once the transaction commits. Raises ReleaseError naming the bad field."""
    from .freeze import validate_config

    name = (name or "").strip()
    if not name:
        raise ReleaseError("Give the release a name.", "name")
    if len(name) > MAX_NAME:
        raise ReleaseError(f"The name is longer than {MAX_NAME} characters.", "name")
    if Release.objects.filter(name=name).exists():
        raise ReleaseError(f"A release named {name!r} exists already: names are unique.", "name")
    normalised = validate_config(config)
    try:
        with transaction.atomic():
            release = Release.objects.create(name=name, description=description or "", config=normalised,
                                             created_by=_user(user))
    except IntegrityError:
        raise ReleaseError(f"A release named {name!r} exists already: names are unique.", "name") from None
    if freeze:
        release_freeze(release)
    return release


def release_freeze(release: Release, *, enqueue: bool = True) -> Release:
    """Queue the freezing of a release that is queued or failed; a frozen release never changes."""
    if release.status == Release.Status.FROZEN:
        raise ReleaseError("This release is frozen already: it never changes. Create a new release instead.",
                           "status")
    if release.status == Release.Status.FREEZING:
        raise ReleaseError("This release is being frozen right now.", "status")
    Release.objects.filter(pk=release.pk).update(status=Release.Status.QUEUED, error="", items_done=0)
    release.status, release.error, release.items_done = Release.Status.QUEUED, "", 0
    if enqueue:
        transaction.on_commit(lambda: tasks.enqueue("curation.release_freeze", release.pk))
    return release


def run_freeze(release_id: int, echo=None) -> Release:
    """What the task does: freeze a queued release. Idempotent under redelivery: a frozen release
    is left alone, and a freeze cut short by a dead worker starts over from no items."""
    from .freeze import freeze

    release = Release.objects.get(pk=release_id)
    if release.status == Release.Status.FROZEN:
        return release
    ReleaseItem.objects.filter(release=release).delete()  # leftovers of an interrupted attempt
    Release.objects.filter(pk=release.pk).update(status=Release.Status.FREEZING, error="", items_done=0)
    release.refresh_from_db()
    try:
        return freeze(release, progress=Throttled(Release, release.pk, "items_done", "items_total", echo))
    except ReleaseError as exc:
        # The library marks the release failed; make sure of it, with the message.
        Release.objects.filter(pk=release.pk).exclude(status=Release.Status.FROZEN).update(
            status=Release.Status.FAILED, error=exc.message)
    except Exception as exc:
        log.exception("freezing release %s failed", release.pk)
        ReleaseItem.objects.filter(release=release).delete()
        Release.objects.filter(pk=release.pk).update(status=Release.Status.FAILED,
                                                     error=f"{type(exc).__name__}: {exc}")
    release.refresh_from_db()
    return release


# --- Exports ---------------------------------------------------------------------------------------


def _whole(value, field: str, low: int, high: int, what: str) -> int:
    try:
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError
            value = int(value)
        number = int(str(value).strip())
    except (TypeError, ValueError):
        raise ReleaseError(f"The {what} must be a whole number.", field) from None
    if not low <= number <= high:
        raise ReleaseError(f"The {what} must be between {low:,} and {high:,}.", field)
    return number


IMAGE_CHOICES = ("include", "none")
ARCHIVE_CHOICES = ("tar", "zip")
MISSING_CHOICES = ("skip", "fail")


def _choice(options: dict, key: str, choices: tuple, what: str) -> str | None:
    if key not in options:
        return None
    value = str(options.pop(key)).strip().lower()
    if value not in choices:
        raise ReleaseError(f"{what} must be one of {', '.join(choices)} (got {value!r}).", key)
    return value


def normalise_options(fmt: str, options: dict | None, release: Release | None = None) -> dict:
    """The options an export of ``fmt`` accepts, checked, with the defaults filled in (so two asks
    for the same files find the same export):

    - ``images``: ``include`` (default) or ``none`` (the manifest then names the storage);
    - ``missing_images``: ``skip`` or ``fail`` (default: the release's ``missing_image``), with images;
    - WebDataset: ``samples_per_shard`` and ``shard_size`` (bytes per tar shard);
    - the other formats with images: ``image_archive`` (``tar`` or ``zip``) and ``shard_size``
      (bytes per images shard).

    Unknown keys, and keys that do nothing for this format, are refused, not ignored; empty values
    mean the default."""
    options = {k: v for k, v in dict(options or {}).items() if v not in (None, "")}
    clean: dict = {"images": _choice(options, "images", IMAGE_CHOICES, "images") or "include"}
    with_images = clean["images"] == "include"
    missing = _choice(options, "missing_images", MISSING_CHOICES, "missing_images")
    if missing and not with_images:
        raise ReleaseError("missing_images applies to an export with images: without them no image file is read.",
                           "missing_images")
    if with_images:
        clean["missing_images"] = missing or ((release.config or {}).get("missing_image") if release else None) or "skip"
    if fmt == ReleaseExport.Format.WEBDATASET:
        if "samples_per_shard" in options:
            clean["samples_per_shard"] = _whole(options.pop("samples_per_shard"), "samples_per_shard",
                                                SAMPLES_PER_SHARD_MIN, SAMPLES_PER_SHARD_MAX, "samples per shard")
    elif with_images:
        clean["image_archive"] = _choice(options, "image_archive", ARCHIVE_CHOICES, "image_archive") or "tar"
    if "shard_size" in options and (with_images or fmt == ReleaseExport.Format.WEBDATASET):
        clean["shard_size"] = _whole(options.pop("shard_size"), "shard_size", SHARD_BYTES_MIN, SHARD_BYTES_MAX,
                                     "shard size in bytes")
    unknown = sorted(options)
    if unknown:
        raise ReleaseError(f"Unknown option{'s' if len(unknown) > 1 else ''} for {fmt}"
                           f"{' without images' if not with_images else ''}: {', '.join(unknown)}.", "options")
    return clean


def export_create(release: Release, format: str, options: dict | None = None, user=None, *,
                  enqueue: bool = True) -> ReleaseExport:
    """An export of a frozen release in one format. A finished (or still running) export with the
    same format and options is returned as it is: the files would be byte-identical."""
    if format not in ReleaseExport.Format.values:
        raise ReleaseError(f"Unknown format {format!r}: choose one of {', '.join(ReleaseExport.Format.values)}.",
                           "format")
    if release.status != Release.Status.FROZEN:
        raise ReleaseError(f"Only a frozen release can be exported; this one is {release.get_status_display().lower()}.",
                           "release")
    clean = normalise_options(format, options, release)
    with transaction.atomic():
        Release.objects.select_for_update().filter(pk=release.pk).first()  # one export per key at a time
        for existing in ReleaseExport.objects.filter(
                release=release, format=format,
                status__in=[ReleaseExport.Status.DONE, ReleaseExport.Status.RUNNING, ReleaseExport.Status.QUEUED]
        ).order_by("-created_at"):
            if existing.options == clean:
                return existing
        export = ReleaseExport.objects.create(release=release, format=format, options=clean, created_by=_user(user),
                                              rows_total=release.items_total)
    if enqueue:
        queue_export(export)
    return export


def queue_export(export: ReleaseExport) -> None:
    transaction.on_commit(lambda: tasks.enqueue("curation.release_export", export.pk))


def export_retry(export: ReleaseExport) -> ReleaseExport:
    """Queue a failed export again (its attempts keep counting)."""
    if export.status != ReleaseExport.Status.FAILED:
        raise ReleaseError("Only a failed export can be retried.", "status")
    ReleaseExport.objects.filter(pk=export.pk).update(status=ReleaseExport.Status.QUEUED, error="", rows_done=0)
    export.refresh_from_db()
    queue_export(export)
    return export


def export_verify(export: ReleaseExport, *, enqueue: bool = True) -> ReleaseExport:
    """Queue a re-export and verify of a done export (``verify.run_verify``); one at a time."""
    from .verify import BUSY

    if export.status != ReleaseExport.Status.DONE:
        raise ReleaseError(f"Only a done export can be verified; this one is {export.get_status_display().lower()}.",
                           "status")
    with transaction.atomic():
        current = ReleaseExport.objects.select_for_update().get(pk=export.pk)
        if (current.verification or {}).get("status") in BUSY:
            raise ReleaseError("This export is being verified already.", "status")
        current.verification = {"status": "queued"}
        current.save(update_fields=["verification"])
    export.verification = current.verification
    if enqueue:
        transaction.on_commit(lambda: tasks.enqueue("curation.release_export_verify", export.pk))
    return export


def export_delete(export: ReleaseExport, storage=None) -> int:
    """Delete an export and every file it has in storage; returns how many files were removed.
    An export a worker is writing right now is refused (its files would come back)."""
    from .publish import clear

    if export.status == ReleaseExport.Status.RUNNING:
        raise ReleaseError("This export is being written right now; delete it once it is done or failed.", "status")
    with transaction.atomic():
        locked = ReleaseExport.objects.select_for_update().filter(pk=export.pk).first()
        if locked is None:
            return 0
        if locked.status == ReleaseExport.Status.RUNNING:
            raise ReleaseError("This export is being written right now; delete it once it is done or failed.",
                               "status")
        removed = clear(locked, storage)
        locked.delete()
    return removed
