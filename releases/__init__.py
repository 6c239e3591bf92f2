"""Dataset releases: freezing a selection into ReleaseItem rows, and writing it out in the formats
trainers use.

- ``freeze.validate_config(config)`` / ``freeze.freeze(release, progress=None)``: the selection
  (collections, a filter run with curator overrides, vote rules, origins, languages, caps,
  deduplication), splits by image (``splits``), provenance per item (``provenance``), the counts,
  the content hash and the dataset card (``card``).
- ``formats.write(export_format, release, out_dir, options, progress=None, storage_open=None)``:
  one format's files, streamed in position order, byte-identical on every run, with the images
  (``formats.images``: ``images/`` tar or zip shards the annotations reference) or without them
  (the export manifest, ``formats.export_manifest``, names the storage).
- ``verify.run_verify(export_id)``: re-export and verify (every sha256 recorded, rewritten, stored).

Nothing here touches Celery, storage publishing or HTTP: the tasks, pages and API call these.
"""


class ReleaseError(Exception):
    """A release that cannot be frozen or exported as asked: ``message`` says why in words a
    curator can act on, ``field`` names the config key (or option) at fault, when there is one."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self):
        return self.message


# Release.report and export reports list at most this many entries of one code; the rest are
# counted in one summary entry, so a million skipped captions do not make a million-entry report.
REPORT_LIMIT = 1000


class Report:
    """Entries of what was left out or changed, capped per code, with a count of every code."""

    def __init__(self, target: list | None = None, limit: int = REPORT_LIMIT):
        self.entries = target if target is not None else []
        self.limit = limit
        self.counts: dict[str, int] = {}

    def add(self, code: str, message: str, **fields) -> None:
        n = self.counts.get(code, 0) + 1
        self.counts[code] = n
        if n <= self.limit:
            self.entries.append({"code": code, "message": message, **fields})

    def finish(self) -> list:
        """Append one summary entry per code that went over the limit; returns the entries."""
        for code, n in sorted(self.counts.items()):
            if n > self.limit:
                self.entries.append({"code": code, "count": n,
                                     "message": f"{n - self.limit} more {code} entries are not listed"})
        return self.entries


__all__ = ["ReleaseError", "Report", "REPORT_LIMIT"]
