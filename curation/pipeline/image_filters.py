"""Image filters of Conceptual Captions (seed 002, Section 3, "Image-based Filtering"): encoding
format, minimum side, aspect ratio, decodability, exact and near duplicates. The unsafe-content check
lives in unsafe.py (its names still import from here); reading an item's file in image_files.py.

They see image Items (``file_name`` in Django's default storage, ``image_format``, ``width``,
``height``, ``sha256``, ``phash``, ``image_status``). An image without a file (status other than
"ready", or no ``file_name``) gets a decision saying so; a file that cannot be read or decoded gets
one with the error. No filter here raises on a bad image.
"""
from __future__ import annotations

import hashlib
import io
import logging
import warnings

from django.core.files.storage import default_storage
from PIL import Image as PILImage

from .base import Decision, Filter, Item, drop, keep, not_applicable
from .image_files import error as _error
from .image_files import has_file, no_file, probe, read_file
from .phash_groups import NearDuplicateGroups
from .registry import register
from .unsafe import NoOpChecker, UnsafeContent, UnsafeContentChecker, load_checker  # noqa: F401 - their old home

log = logging.getLogger(__name__)

# Pillow's decompression-bomb limit stays on (as in ingest): a huge image is refused, not decoded.
assert PILImage.MAX_IMAGE_PIXELS, "Pillow's pixel limit must stay on"

PHASH_SIZE = 8  # the hash size cached in Image.phash (64 bits, 16 hex digits)


def phash_of(img: PILImage.Image, hash_size: int = PHASH_SIZE) -> str:
    import imagehash

    return str(imagehash.phash(img, hash_size=hash_size))


def phash_file(name: str, hash_size: int = PHASH_SIZE) -> str:
    with default_storage.open(name, "rb") as fh, PILImage.open(fh) as img:
        return phash_of(img, hash_size)


def hamming(a: str, b: str) -> int:
    return (int(a, 16) ^ int(b, 16)).bit_count()


def cache_phashes(found: dict[int, str]) -> None:
    """Image.phash is a cache of the 8x8 pHash: fill it for the images we had to hash."""
    if not found:
        return
    from ..models import Image

    Image.objects.bulk_update([Image(pk=pk, phash=h) for pk, h in found.items()], ["phash"], batch_size=500)


def check_number(flt: Filter, key: str, minimum: float, *, integer: bool = False) -> None:
    """Refuse a parameter that would fail every chunk later: the curator sees it when saving."""
    value = flt.params[key]
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or value < minimum:
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{flt.name}: {key} must be {kind} >= {minimum}, not {value!r}")


# --- Format, size, aspect ratio -------------------------------------------------------------------

@register
class ImageFormat(Filter):
    name = "image_format"
    label = "Image format"
    description = ("Keeps images whose encoding format is in the list (JPEG only in the paper; add PNG "
                   "and others for collections such as the demo's).")
    target = "image"
    defaults = {"formats": ["JPEG"]}

    def __init__(self, params=None, state=None):
        super().__init__(params, state)
        formats = self.params["formats"]
        if not isinstance(formats, list) or not all(isinstance(f, str) for f in formats):
            raise ValueError(f"{self.name}: formats must be a list of format names such as ['JPEG', 'PNG']")

    def apply(self, items):
        allowed = {f.upper() for f in self.params["formats"]}
        if "JPEG" in allowed:
            allowed.add("MPO")  # Pillow's name for a camera JPEG that carries extra pictures
        out = []
        for item in items:
            if not has_file(item):
                out.append(no_file(item))
                continue
            fmt, _, _ = probe(item)
            if not fmt:
                out.append(drop("unknown_format"))
            elif fmt.upper() in allowed:
                out.append(keep("allowed_format", format=fmt))
            else:
                out.append(drop("format_not_allowed", format=fmt, allowed=sorted(allowed)))
        return out


def by_dimensions(items, judge) -> list:
    """One decision per item from its width and height: ``judge(width, height)``; items with no
    file or no readable size get their own reasons."""
    out = []
    for item in items:
        if not has_file(item):
            out.append(no_file(item))
            continue
        _, width, height = probe(item)
        out.append(judge(width, height) if width and height else drop("no_dimensions"))
    return out


@register
class ImageSize(Filter):
    name = "image_size"
    label = "Minimum side"
    description = "Keeps images whose width and height are both greater than min_side pixels (400 in the paper)."
    target = "image"
    defaults = {"min_side": 400}
    score_thresholds = ("min_side",)

    def __init__(self, params=None, state=None):
        super().__init__(params, state)
        check_number(self, "min_side", 0)

    def apply(self, items):
        min_side = self.params["min_side"]

        def judge(width, height):
            side = min(width, height)
            details = {"width": width, "height": height, "min_side": min_side}
            return keep("large_enough", side, **details) if side > min_side else drop("too_small", side, **details)

        return by_dimensions(items, judge)


@register
class AspectRatio(Filter):
    name = "aspect_ratio"
    label = "Aspect ratio"
    description = "Keeps images whose longer side is at most max_ratio times the shorter (2 in the paper). Score: the ratio."
    target = "image"
    defaults = {"max_ratio": 2.0}
    score_thresholds = ("max_ratio",)

    def __init__(self, params=None, state=None):
        super().__init__(params, state)
        check_number(self, "max_ratio", 1)

    def apply(self, items):
        max_ratio = self.params["max_ratio"]

        def judge(width, height):
            ratio = round(max(width, height) / min(width, height), 4)
            details = {"width": width, "height": height, "max_ratio": max_ratio}
            return keep("ratio_ok", ratio, **details) if ratio <= max_ratio else drop("bad_aspect_ratio", ratio, **details)

        return by_dimensions(items, judge)


# --- Decodability ---------------------------------------------------------------------------------

@register
class Decodable(Filter):
    name = "decodable"
    label = "Decodes"
    description = ("Opens each image file and decodes every pixel (Pillow, pixel limit on): truncated, corrupt or "
                   "replaced files are dropped with the error. Also computes the perceptual hash for near_duplicate.")
    target = "image"
    # verify_sha256: a file whose bytes no longer match the sha256 recorded at import was replaced.
    defaults = {"verify_sha256": True, "compute_phash": True}

    def apply(self, items):
        out, hashed = [], {}
        for item in items:
            decision = self._check(item)
            if decision.details.get("phash") and decision.details["phash"] != item.phash:
                hashed[item.image_id] = decision.details["phash"]
            out.append(decision)
        try:
            cache_phashes(hashed)
        except Exception as exc:  # noqa: BLE001 - the cache is optional; the decisions carry the hashes
            log.warning("could not cache pHashes: %s", exc)
        return out

    def _check(self, item: Item) -> Decision:
        if not has_file(item):
            return no_file(item)
        try:
            data = read_file(item.file_name)
        except Exception as exc:  # noqa: BLE001 - a missing or unreadable file is a decision
            return drop("no_file", error=_error(exc), file=item.file_name)
        if self.params["verify_sha256"] and item.sha256:
            actual = hashlib.sha256(data).hexdigest()
            if actual != item.sha256:
                return drop("file_changed", expected=item.sha256, actual=actual, bytes=len(data))
        try:
            with warnings.catch_warnings():  # over the pixel limit is refused, as at ingest
                warnings.simplefilter("error", PILImage.DecompressionBombWarning)
                with PILImage.open(io.BytesIO(data)) as img:
                    img.load()  # decodes every pixel: truncated and corrupt data raise here
                    details = {"format": img.format, "width": img.width, "height": img.height}
                    if self.params["compute_phash"]:
                        details["phash"] = phash_of(img)
        except (PILImage.DecompressionBombError, PILImage.DecompressionBombWarning) as exc:
            return drop("too_many_pixels", error=_error(exc))
        except Exception as exc:  # noqa: BLE001 - Pillow raises OSError, SyntaxError, ValueError...
            return drop("undecodable", error=_error(exc), bytes=len(data))
        return keep("decodes", **details)


# --- Duplicates (run-level) -----------------------------------------------------------------------

def _batches(values: list, size: int = 500):
    for i in range(0, len(values), size):
        yield values[i:i + size]


@register
class ExactDuplicate(Filter):
    name = "exact_duplicate"
    label = "Exact duplicates"
    description = ("Among identical files (same sha256) keeps the first image (lowest id) and drops the others; "
                   "with across_collections, an identical image already in another collection counts as the first "
                   "when its id is lower.")
    target = "image"
    run_level = True
    defaults = {"across_collections": True}

    def apply(self, items):
        """This batch judged alone, as if it were the whole run (previews and tests)."""
        rows = [{"image_id": it.image_id, "sha256": it.sha256} for it in items]
        found = self.decide_run(rows)
        return [found.get(it.image_id) or not_applicable("no_sha256") for it in items]

    def decide_run(self, rows):
        from ..models import Image

        sha_of = {}
        for row in rows:
            if row.get("sha256"):
                sha_of.setdefault(row["image_id"], row["sha256"])
        first: dict[str, int] = {}
        for image_id in sorted(sha_of):
            first.setdefault(sha_of[image_id], image_id)
        elsewhere: dict[str, tuple[int, int]] = {}  # sha256 -> (image id, collection id) outside the run
        if self.params["across_collections"] and first:
            collections = set()
            for batch in _batches(sorted(sha_of)):
                collections |= set(Image.objects.filter(pk__in=batch).values_list("collection_id", flat=True))
            for batch in _batches(sorted(first)):
                for pk, sha, coll in (Image.objects.filter(sha256__in=batch).exclude(collection_id__in=collections)
                                      .order_by("pk").values_list("pk", "sha256", "collection_id")):
                    elsewhere.setdefault(sha, (pk, coll))
        out = {}
        for image_id in sorted(sha_of):
            sha = sha_of[image_id]
            other = elsewhere.get(sha)
            if other and other[0] < image_id:
                out[image_id] = drop("duplicate_of", of=other[0], collection=other[1], sha256=sha)
            elif first[sha] != image_id:
                out[image_id] = drop("duplicate_of", of=first[sha], sha256=sha)
            else:
                out[image_id] = keep("first_copy", sha256=sha)
        return out


@register
class NearDuplicate(Filter):
    name = "near_duplicate"
    label = "Near duplicates"
    description = ("Perceptual hash (imagehash pHash): going through the images by id, an image within max_distance "
                   "bits of an image already kept is dropped as its near duplicate (resized or re-encoded copies).")
    target = "image"
    run_level = True
    # Over a run: one streamed pass collects every survivor's hash into packed arrays (16 bytes an image,
    # ``prepare_run``) and solves the whole run at once; the decisions are then written batch by batch.
    run_shard = "row"
    defaults = {"max_distance": 4, "hash_size": PHASH_SIZE}

    def __init__(self, params=None, state=None):
        super().__init__(params, state)
        check_number(self, "max_distance", 0, integer=True)
        check_number(self, "hash_size", 2, integer=True)
        if self.params["hash_size"] > 11:  # Image.phash holds 32 hex digits
            raise ValueError(f"{self.name}: hash_size must be at most 11, not {self.params['hash_size']}")
        self._run: tuple[NearDuplicateGroups, dict[int, Decision]] | None = None

    def _valid(self, value: str | None) -> bool:
        digits = (self.params["hash_size"] ** 2 + 3) // 4
        if not value or len(value) != digits:
            return False
        try:
            int(value, 16)
        except ValueError:
            return False
        return True

    def _groups(self) -> NearDuplicateGroups:
        return NearDuplicateGroups(self.params["hash_size"] ** 2, self.params["max_distance"])

    def apply(self, items):
        """Hashes each image (from the cache in Image.phash when it is there; the hash goes in the
        decision's details), then judges this batch alone, as if it were the whole run."""
        out: dict[int, Decision] = {}
        groups, hashed = self._groups(), {}
        for item in items:
            if not has_file(item):
                out[item.image_id] = not_applicable("no_file", status=item.image_status)
                continue
            value = item.phash if self._valid(item.phash) else None
            if value is None:
                try:
                    value = phash_file(item.file_name, self.params["hash_size"])
                except Exception as exc:  # noqa: BLE001
                    out[item.image_id] = not_applicable("undecodable", error=_error(exc))
                    continue
                if self.params["hash_size"] == PHASH_SIZE:
                    hashed[item.image_id] = value
            groups.add(item.image_id, int(value, 16))
        cache_phashes(hashed)
        groups.solve()
        return [out.get(it.image_id) or self._decision(groups, it.image_id) for it in items]

    def prepare_run(self, rows) -> None:
        """One pass over the run's survivors (an iterator): each image's hash, from the row (a cached or
        earlier step's pHash) or from its file, packed; then the run is solved."""
        groups, not_applicable_of = self._groups(), {}
        missing: list[int] = []
        for row in rows:
            if self._valid(row.get("phash")):
                groups.add(row["image_id"], int(row["phash"], 16))
            else:
                missing.append(row["image_id"])
                if len(missing) >= 500:
                    self._hash_files(missing, groups, not_applicable_of)
                    missing = []
        self._hash_files(missing, groups, not_applicable_of)
        groups.solve()
        self._run = (groups, not_applicable_of)

    def _hash_files(self, image_ids: list[int], groups: NearDuplicateGroups, out: dict[int, Decision]) -> None:
        """Images no earlier step hashed: hash them now (and fill Image.phash's cache)."""
        from ..models import Image

        hashed = {}
        for pk, name, status in Image.objects.filter(pk__in=image_ids).values_list("pk", "file", "status"):
            if status != "ready" or not name:
                out[pk] = not_applicable("no_file", status=status)
                continue
            try:
                value = phash_file(name, self.params["hash_size"])
            except Exception as exc:  # noqa: BLE001
                out[pk] = not_applicable("undecodable", error=_error(exc))
                continue
            groups.add(pk, int(value, 16))
            if self.params["hash_size"] == PHASH_SIZE:
                hashed[pk] = value
        cache_phashes(hashed)

    def decide_run(self, rows):
        """The decisions of ``rows``: from the run solved by ``prepare_run``, or (called alone) with these
        rows as the whole run."""
        if self._run is None:
            self.prepare_run(iter(rows))
            groups, not_applicable_of = self._run
            self._run = None
        else:
            groups, not_applicable_of = self._run
        out = {}
        for row in rows:
            image_id = row["image_id"]
            if image_id in out:
                continue
            out[image_id] = not_applicable_of.get(image_id) or self._decision(groups, image_id)
        return out

    @staticmethod
    def _decision(groups: NearDuplicateGroups, image_id: int) -> Decision:
        if image_id not in groups:  # not in the run that was solved (never happens from the executor)
            return not_applicable("not_in_run")
        phash = groups.hex_of(image_id)
        found = groups.nearest(image_id)
        if found:
            return drop("near_duplicate_of", found[1], of=found[0], distance=found[1], phash=phash)
        return keep("distinct", phash=phash)
