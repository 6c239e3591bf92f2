"""The selection of a release, image by image (images in id order, in pages of ``IMAGE_PAGE``,
each page's facts loaded by ``page_facts.load_page``):

1. Candidate captions. Without a run: the captions of the collections (transformed captions and
   caption seeds only when "transformed", "seed" are among ``origins``). With a run: the captions the
   run decided on that it did not drop, counting curator overrides (the final outcome, override or
   outcome, is keep or "na" at every step, image steps included); the released text is the run's
   transformed descendant of that caption (raw -> cropped -> hypernymized) when it made one. With
   "seed" among ``origins``, each such caption also brings the seed captions (origin "seed", "person
   slays dragon") the run's caption_seeds step found in it (seed 001, Section 2; see
   pipeline/seed_captions.py), with its decisions: ``origins`` ["seed"] ships the seeds instead of
   the descriptions, ["seed", "museum"] both.
2. ``origins`` (of the caption the run decided on, or of the caption itself) and ``languages``
   (the caption's, else its collection's). Model-generated captions only with
   ``include_model_captions``, and never as test references (``model_captions``).
3. ``vote_rules``: every rule must hold for votes on the caption or the caption it was
   transformed from (``good_Nplus``: at least N GOOD votes of unblocked workers on one task;
   ``fluent``: the "consistent" aggregate says fluent; ``label``: the aggregate of ``method``
   equals ``label``, per ``dimension`` for candidate kinds); see ``vote_rules``.
4. ``human_verified``: vote rules given (and so satisfied), or the ``verified_by`` rules hold, or
   a crowd-written caption whose rating passed (a positive consensus in a rating campaign).
5. Per image: a missing file (not ready, no file, or absent from storage) is skipped with a
   report entry or fails the freeze (``missing_image``); ``dedup`` drops images whose bytes
   (sha256) or perceptual hash (within ``phash_distance`` bits) match an image already taken;
   ``max_captions_per_image`` keeps the first captions, human-verified ones first.

``Selection`` turns the chosen captions into items (``items``) at consecutive positions, writes
them in batches, and records per image its split key and position range for ``split_assign``.
"""
from __future__ import annotations

import logging
from array import array
from collections import defaultdict

from django.core.files.storage import default_storage

from . import ReleaseError, Report
from .config import GOOD_RULES
from .items import WRITE_BATCH, build_item, write_items
from .model_captions import generated
from .page_facts import PageFacts, load_page
from .splits import SplitPlan, split_key
from .vote_rules import passed_rating, rated_ids, rule_holds

log = logging.getLogger(__name__)

IMAGE_PAGE = 500


class Selection:
    """One pass of the selection over a release's images: ``pages()`` then ``process(page)`` for
    each, then ``flush(force=True)``. Afterwards ``position`` is the number of items written,
    ``plan`` and ``ranges`` say where each image's items are, ``report`` what was left out."""

    def __init__(self, release, config: dict, progress=None):
        from annotation.models import Campaign, Membership
        from curation.models import Collection, FilterRun

        self.release = release
        self.config = config
        self.progress = progress
        self.report = Report()
        self.run = FilterRun.objects.get(pk=config["run"]) if config["run"] else None
        self.snapshot = self.run.snapshot if self.run else []
        self.run_has_caption_steps = any(s.get("target") != "image" for s in self.snapshot)
        self.languages = set(config["languages"])
        self.origins = set(config["origins"])
        self.include_model = bool(config.get("include_model_captions"))
        self.model_positions = array("q")  # items of model captions: never left in the test split
        self.model_left_out = 0
        self.collection_language = dict(Collection.objects.filter(pk__in=config["collections"])
                                        .values_list("pk", "language"))
        self.kinds = dict(Campaign.objects.values_list("pk", "kind"))
        rule_campaigns = {r["campaign"] for r in config["vote_rules"] + config["verified_by"]}
        self.blocked = defaultdict(set)
        for campaign_id, worker_id in Membership.objects.filter(campaign_id__in=rule_campaigns, blocked=True) \
                .values_list("campaign_id", "worker_id"):
            self.blocked[campaign_id].add(worker_id)
        self.good_campaigns = {r["campaign"] for r in config["vote_rules"] + config["verified_by"]
                               if r["rule"] in GOOD_RULES}
        self.seen_sha: set[bytes] = set()
        self.phash_index = None
        if config["dedup"] == "phash":
            from curation.pipeline.phash_groups import HashIndex

            self.phash_index = HashIndex(64, config["phash_distance"])
        self.plan = SplitPlan()
        self.position = 0
        self.pending: list = []
        self.ranges: list[tuple[int, int]] = []  # per image: its first and last position
        self.images_total = 0
        self.images_done = 0

    # -- per page of images --------------------------------------------------------------------
    def pages(self):
        from curation.models import Image

        base = Image.objects.filter(collection_id__in=self.config["collections"])
        self.images_total = base.count()
        fields = ("pk", "collection_id", "sha256", "phash", "file", "status", "width", "height", "format",
                  "license", "credit", "external_id")
        last = 0
        while True:
            page = list(base.filter(pk__gt=last).order_by("pk").values(*fields)[:IMAGE_PAGE])
            if not page:
                return
            last = page[-1]["pk"]
            yield page

    def process(self, images: list[dict]) -> None:
        page = load_page(images, run=self.run, good_campaigns=self.good_campaigns, blocked=self.blocked)
        for image in images:
            self.images_done += 1
            self._image(image, page)
        self.flush(force=False)
        if self.progress:
            self.progress(self.images_done, self.images_total)

    def flush(self, force: bool) -> None:
        if self.pending and (force or len(self.pending) >= WRITE_BATCH):
            write_items(self.pending, self.run)
            self.pending = []

    # -- per image -----------------------------------------------------------------------------
    def _image(self, image: dict, page: PageFacts) -> None:
        chosen = self._chosen(image, page)
        if not chosen or not self._has_file(image, chosen) or self._duplicate(image, chosen):
            return
        chosen = self._capped(image, chosen)
        first = self.position
        for c in chosen:
            if c["model"]:
                self.model_positions.append(self.position)
            self.pending.append(build_item(self.release, self.position, image, c, page, run=self.run,
                                           snapshot=self.snapshot, kinds=self.kinds))
            self.position += 1
        references = [c for c in chosen if not c["model"]]  # what the image could hold in the test split
        hv = self.config["test_human_verified"]
        eligible = bool(references) and (not hv or any(c["verified"] for c in references))
        self.plan.add(split_key(self.config["seed"], image["sha256"], image["pk"]), first, eligible)
        self.ranges.append((first, self.position - 1))

    def _candidates(self, image: dict, page: PageFacts):
        """[(base caption, released caption, decisions)] of one image."""
        out = []
        image_captions = page.by_image.get(image["pk"], [])
        if self.run is None:
            for c in image_captions:
                if c["origin"] in ("transformed", "seed") and c["origin"] not in self.origins:
                    continue
                out.append((c, c, []))
            return out
        img_decisions = page.image_decisions.get(image["pk"], [])
        image_dropped = any((d["override"] or d["outcome"]) == "drop" for d in img_decisions)
        with_seeds = "seed" in self.origins
        for c in image_captions:
            if c["origin"] in ("transformed", "seed"):
                continue
            own = page.caption_decisions.get(c["pk"], [])
            seen = bool(own) or (bool(img_decisions) and not self.run_has_caption_steps)
            if not seen:
                continue
            if image_dropped or any((d["override"] or d["outcome"]) == "drop" for d in own):
                continue
            released, hops = c, 0
            while released["pk"] in page.children and hops < 50:
                released = page.captions[page.children[released["pk"]]]
                hops += 1
            out.append((c, released, img_decisions + own))
            if with_seeds:
                out.extend((page.captions[s], page.captions[s], img_decisions + own)
                           for s in page.seeds.get(c["pk"], ()))
        return out

    def _chosen(self, image: dict, page: PageFacts) -> list[dict]:
        """The candidates that pass origins, languages and vote rules, each marked verified or not."""
        config = self.config
        chosen = []
        for base, released, decisions in self._candidates(image, page):
            if self.origins and base["origin"] not in self.origins:
                continue
            model = generated(base, page.captions)
            if model and not self.include_model:
                self.model_left_out += 1
                continue
            language = released["language"] or base["language"] or self.collection_language.get(
                image["collection_id"], "")
            if self.languages and language not in self.languages:
                continue
            rated = rated_ids(released, page.captions)
            rules = [{"campaign": r["campaign"], "rule": r["rule"], "satisfied": True} for r in config["vote_rules"]]
            if not all(rule_holds(r, rated, page.good_votes, page.aggregates) for r in config["vote_rules"]):
                continue
            verified = bool(config["vote_rules"])
            if not verified and config["verified_by"]:
                verified = all(rule_holds(r, rated, page.good_votes, page.aggregates) for r in config["verified_by"])
                rules += [{"campaign": r["campaign"], "rule": r["rule"], "verified_by": True, "satisfied": verified}
                          for r in config["verified_by"]]
            if not verified and base["origin"] == "crowd":
                verified = passed_rating(rated, page.aggregates, self.kinds)
            chosen.append({"base": base, "released": released, "decisions": decisions, "language": language,
                           "rated": rated, "verified": verified, "rules": rules, "model": model})
        return chosen

    def _has_file(self, image: dict, chosen: list[dict]) -> bool:
        """Whether the image's file is there; if not, report it or fail (``missing_image``)."""
        if image["status"] == "ready" and image["file"] and self._exists(image["file"]):
            return True
        why = ("has no file" if not image["file"] else
               f"is {image['status']}" if image["status"] != "ready" else "is missing from storage")
        message = f"Image #{image['pk']} ({image['file'] or image['external_id'] or 'no file'}) {why}"
        if self.config["missing_image"] == "fail":
            raise ReleaseError(message + "; the release is set to fail on a missing image.", "missing_image")
        self.report.add("missing_image", message + f"; its {len(chosen)} caption(s) are left out.",
                        image=image["pk"], file=image["file"], captions=len(chosen))
        return False

    def _duplicate(self, image: dict, chosen: list[dict]) -> bool:
        """Whether ``dedup`` drops the image (reported); an image kept is remembered."""
        if self.config["dedup"] == "none" or not image["sha256"]:
            return False
        digest = bytes.fromhex(image["sha256"])
        if digest in self.seen_sha:
            self.report.add("duplicate_image", f"Image #{image['pk']} has the same bytes as an image already "
                            f"in the release; its {len(chosen)} caption(s) are left out.", image=image["pk"],
                            sha256=image["sha256"], captions=len(chosen))
            return True
        if self.phash_index is not None:
            value = self._phash(image)
            if value is not None:
                found = self.phash_index.nearest(value)
                if found is not None:
                    self.report.add("near_duplicate_image",
                                    f"Image #{image['pk']} is within {found[1]} bits (pHash) of image "
                                    f"#{found[0]}; its {len(chosen)} caption(s) are left out.",
                                    image=image["pk"], of=found[0], distance=found[1], captions=len(chosen))
                    return True
                self.phash_index.add(image["pk"], value)
        self.seen_sha.add(digest)
        return False

    def _capped(self, image: dict, chosen: list[dict]) -> list[dict]:
        """Human-verified first, then by caption id; beyond ``max_captions_per_image`` reported."""
        chosen.sort(key=lambda c: (not c["verified"], c["released"]["pk"]))
        cap = self.config["max_captions_per_image"]
        if cap and len(chosen) > cap:
            for extra in chosen[cap:]:
                self.report.add("over_cap", f"Caption #{extra['released']['pk']} of image #{image['pk']} is over "
                                f"the cap of {cap} captions per image.", image=image["pk"],
                                caption=extra["released"]["pk"])
            chosen = chosen[:cap]
        return chosen

    def _exists(self, name: str) -> bool:
        try:
            return default_storage.exists(name)
        except Exception:
            log.exception("checking %s in storage failed", name)
            return False

    def _phash(self, image) -> int | None:
        from curation.pipeline.image_filters import phash_file

        value = image["phash"]
        if not value or len(value) != 16:
            try:
                value = phash_file(image["file"])
            except Exception as exc:  # noqa: BLE001 - an undecodable image is not deduplicated by pHash
                self.report.add("phash_failed", f"Image #{image['pk']} could not be hashed ({exc}); it is kept.",
                                image=image["pk"])
                return None
        try:
            return int(value, 16)
        except ValueError:
            return None


__all__ = ["IMAGE_PAGE", "Selection"]
