"""Freezing a release: validate its config, run the selection once, write ReleaseItem rows.

``freeze`` runs the steps, each in its own module:

- ``config``: ``validate_config`` normalises the config (or names the field at fault);
- ``selection``: which captions of which images, image by image (run decisions and overrides,
  origins, languages, vote rules, human verification, missing files, deduplication, the cap),
  with each page's facts from ``page_facts`` and the rules judged by ``vote_rules``;
- ``items``: each chosen caption's ReleaseItem with its provenance, written with bulk_create in
  batches, in a stable order (image id, then human-verified first, then caption id);
- ``split_assign``: splits assigned afterwards by image (``splits``), one UPDATE per batch of
  position ranges; then ``model_captions`` takes model captions out of the test split;
- ``summary``: a last streaming pass computes the counts, the content hash and the card.

Memory stays bounded by a page of images plus ~24 bytes per image for the split plan (and a set
of hashes for deduplication). Every name callers used from this module is still importable here.
"""
from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from . import ReleaseError, model_captions

# The settings' names and sizes this module defined before the split, still importable from here.
from .config import CONFIG_KEYS as CONFIG_KEYS
from .config import DEDUP as DEDUP
from .config import GOOD_RULES as GOOD_RULES
from .config import MISSING as MISSING
from .config import RULE_METHODS as RULE_METHODS
from .config import RULES as RULES
from .config import validate_config
from .items import WRITE_BATCH as WRITE_BATCH
from .selection import IMAGE_PAGE as IMAGE_PAGE
from .selection import Selection
from .split_assign import apply_splits
from .summary import summarise

log = logging.getLogger(__name__)


def _fail(release, message: str) -> None:
    from releases.models import Release, ReleaseItem

    ReleaseItem.objects.filter(release=release).delete()
    Release.objects.filter(pk=release.pk).update(status=Release.Status.FAILED, error=message[:5000])
    release.status, release.error = Release.Status.FAILED, message


def freeze(release, progress=None):
    """Run the selection of ``release.config`` once and freeze it (see the module docstring).
    Raises ReleaseError for a frozen release, a bad config, an empty selection or a missing image
    under ``missing_image: fail`` (the release is then FAILED with the message)."""
    from releases.models import Release, ReleaseItem

    with transaction.atomic():
        current = Release.objects.select_for_update().get(pk=release.pk)
        if current.status == Release.Status.FROZEN:
            raise ReleaseError(f"Release {current.name!r} is frozen; a frozen release never changes. "
                               "Make a new release instead.", "status")
        Release.objects.filter(pk=release.pk).update(status=Release.Status.FREEZING, error="", items_done=0)
    release.status = Release.Status.FREEZING
    ReleaseItem.objects.filter(release=release).delete()  # what a crashed attempt left behind
    try:
        config = validate_config(release.config)
        release.config = config
        selection = Selection(release, config, progress)
        for page in selection.pages():
            selection.process(page)
        selection.flush(force=True)
        if selection.position == 0:
            left = ", ".join(f"{n} {code}" for code, n in sorted(selection.report.counts.items()))
            raise ReleaseError("The selection holds no captions: no caption of these collections passes the run, "
                               "the vote rules, origins and languages" + (f" ({left})" if left else "")
                               + ". Loosen the selection and freeze again.", "collections")
        apply_splits(release, selection.plan, selection.ranges)
        model_captions.report_left_out(selection.report, selection.model_left_out)
        release.items_total = selection.position - model_captions.drop_from_test(
            release, selection.model_positions, selection.report)
        release.report = selection.report.finish()
        summarise(release, progress)
        release.items_done = release.items_total
        release.status = Release.Status.FROZEN
        release.error = ""
        release.frozen_at = timezone.now()
        release.save(update_fields=["config", "status", "items_total", "items_done", "counts", "report",
                                    "content_hash", "card", "error", "frozen_at"])
        if progress:
            progress(release.items_total, release.items_total)
        return release
    except ReleaseError as exc:
        _fail(release, exc.message)
        raise
    except Exception as exc:
        log.exception("freezing release %s failed", release.pk)
        _fail(release, f"Freezing failed: {type(exc).__name__}: {exc}")
        raise


__all__ = ["validate_config", "freeze", "ReleaseError"]
