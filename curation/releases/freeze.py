"""Freezing a release: validate its config, run the selection once, write ReleaseItem rows.

The selection, image by image (images in id order, in pages of ``IMAGE_PAGE``; per page one
query each for captions, the run's decisions and reviews, votes and aggregates):

1. Candidate captions. Without a run: the captions of the collections (transformed captions only
   when "transformed" is among ``origins``). With a run: the captions the run decided on that it
   did not drop, counting curator overrides (the final outcome, override or outcome, is keep or
   "na" at every step, image steps included); the released text is the run's transformed
   descendant of that caption (raw -> cropped -> hypernymized) when it made one.
2. ``origins`` (of the caption the run decided on, or of the caption itself) and ``languages``
   (the caption's, else its collection's).
3. ``vote_rules``: every rule must hold for votes on the caption or the caption it was
   transformed from (``good_Nplus``: at least N GOOD votes of unblocked workers on one task;
   ``fluent``: the "consistent" aggregate says fluent; ``label``: the aggregate of ``method``
   equals ``label``, per ``dimension`` for candidate kinds).
4. ``human_verified``: vote rules given (and so satisfied), or the ``verified_by`` rules hold, or
   a crowd-written caption whose rating passed (a positive consensus in a rating campaign).
5. Per image: a missing file (not ready, no file, or absent from storage) is skipped with a
   report entry or fails the freeze (``missing_image``); ``dedup`` drops images whose bytes
   (sha256) or perceptual hash (within ``phash_distance`` bits) match an image already taken;
   ``max_captions_per_image`` keeps the first captions, human-verified ones first.

Items are written in a stable order (image id, then human-verified first, then caption id) with
bulk_create in batches; splits are assigned afterwards by image (``splits``) with one UPDATE per
batch of position ranges, and a last streaming pass computes the counts, the content hash and the
card. Memory stays bounded by a page of images plus ~24 bytes per image for the split plan (and a
set of hashes for deduplication).
"""
from __future__ import annotations

import logging
from collections import defaultdict

from django.core.files.storage import default_storage
from django.db import connection, transaction
from django.utils import timezone

from . import ReleaseError, Report, model_provenance
from . import provenance as prov
from .splits import DEFAULT_RATIOS, SPLITS, SplitPlan, split_key

log = logging.getLogger(__name__)

IMAGE_PAGE = 500
WRITE_BATCH = 2000
CONFIG_KEYS = {"collections", "run", "vote_rules", "verified_by", "origins", "languages", "max_captions_per_image",
               "dedup", "phash_distance", "splits", "seed", "test_human_verified", "missing_image"}
GOOD_RULES = {"good_1plus": 1, "good_2plus": 2, "good_3plus": 3}
RULES = (*GOOD_RULES, "fluent", "label")
RULE_METHODS = ("majority", "dawid_skene", "consistent", "glad", "mace", "mean")
DEDUP = ("sha256", "phash", "none")
MISSING = ("skip", "fail")


# --- config ----------------------------------------------------------------------------------------

def _int(value, field: str, *, minimum: int | None = None, label: str = "a whole number") -> int:
    if isinstance(value, bool):
        raise ReleaseError(f"{field} must be {label}.", field)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise ReleaseError(f"{field} must be {label}, not {value!r}.", field)
    if minimum is not None and value < minimum:
        raise ReleaseError(f"{field} must be at least {minimum}.", field)
    return value


def _strings(value, field: str) -> list[str]:
    if value in (None, "", []):
        return []
    if isinstance(value, str):
        value = [v for v in (p.strip() for p in value.split(",")) if v]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ReleaseError(f"{field} must be a list of names.", field)
    return sorted({v.strip() for v in value})


def _rules(value, field: str, collections: list[int]) -> list[dict]:
    from annotation.kinds import CandidatesKind, SliderKind, WriteKind
    from annotation.models import Campaign

    if value in (None, "", []):
        return []
    if not isinstance(value, list):
        raise ReleaseError(f"{field} must be a list of rules.", field)
    out = []
    for n, rule in enumerate(value, start=1):
        if not isinstance(rule, dict):
            raise ReleaseError(f"{field} rule {n} must be an object with campaign and rule.", field)
        unknown = set(rule) - {"campaign", "rule", "label", "method", "dimension"}
        if unknown:
            raise ReleaseError(f"{field} rule {n}: unknown keys {', '.join(sorted(unknown))}.", field)
        campaign_id = _int(rule.get("campaign"), f"{field} rule {n} campaign", label="a campaign id")
        campaign = Campaign.objects.filter(pk=campaign_id).first()
        if campaign is None:
            raise ReleaseError(f"{field} rule {n}: there is no campaign #{campaign_id}.", field)
        if campaign.collection_id not in collections:
            raise ReleaseError(f"{field} rule {n}: campaign {campaign.name!r} rates another collection "
                               f"(#{campaign.collection_id}), not one of this release's.", field)
        name = rule.get("rule")
        if name not in RULES:
            raise ReleaseError(f"{field} rule {n}: the rule must be one of {', '.join(RULES)}, not {name!r}.", field)
        kind = campaign.kind_spec
        if isinstance(kind, WriteKind):
            raise ReleaseError(f"{field} rule {n}: campaign {campaign.name!r} writes captions; it has no votes "
                               "on captions to satisfy a rule.", field)
        if name in GOOD_RULES and "good" not in kind.categories and not isinstance(kind, SliderKind):
            raise ReleaseError(f"{field} rule {n}: {name} needs a GOOD/BAD campaign (quality or "
                               f"informativeness), and {campaign.name!r} is a {kind.name} campaign.", field)
        if name == "fluent" and kind.name != "fluency":
            raise ReleaseError(f"{field} rule {n}: the fluent rule needs a fluency campaign, and "
                               f"{campaign.name!r} is a {kind.name} campaign.", field)
        label = rule.get("label")
        if name == "label":
            if not isinstance(label, str) or not label.strip():
                raise ReleaseError(f"{field} rule {n}: the label rule needs a label.", field)
            label = label.strip()
        else:
            label = None
        default_method = {"fluent": "consistent", "label": "dawid_skene"}.get(name, "votes")
        method = rule.get("method") or default_method
        if name in GOOD_RULES:
            method = "votes"  # counted from the votes themselves (seed 002)
        elif method not in RULE_METHODS:
            raise ReleaseError(f"{field} rule {n}: the method must be one of {', '.join(RULE_METHODS)}.", field)
        entry = {"campaign": campaign_id, "rule": name, "label": label, "method": method}
        if isinstance(kind, CandidatesKind):
            dimension = rule.get("dimension") or kind.dimensions[0]
            if dimension not in kind.dimensions:
                raise ReleaseError(f"{field} rule {n}: the dimension must be one of "
                                   f"{', '.join(kind.dimensions)}.", field)
            entry["dimension"] = dimension
        out.append(entry)
    return out


def validate_config(config: dict) -> dict:
    """The normalised config, or ReleaseError(message, field) naming what is wrong."""
    from curation.models import Caption, Collection, FilterRun

    if not isinstance(config, dict):
        raise ReleaseError("The release config must be an object.", "config")
    unknown = set(config) - CONFIG_KEYS
    if unknown:
        key = sorted(unknown)[0]
        raise ReleaseError(f"Unknown release setting{'s' if len(unknown) > 1 else ''}: "
                           f"{', '.join(sorted(unknown))}.", key)
    raw = config.get("collections")
    if isinstance(raw, (int, str)) and not isinstance(raw, bool):
        raw = [raw]
    if not isinstance(raw, (list, tuple)) or not raw:
        raise ReleaseError("Choose at least one collection.", "collections")
    collections = sorted({_int(c, "collections", label="a list of collection ids") for c in raw})
    found = set(Collection.objects.filter(pk__in=collections).values_list("pk", flat=True))
    if missing := [c for c in collections if c not in found]:
        raise ReleaseError(f"There is no collection #{missing[0]}.", "collections")

    run_id = config.get("run")
    if run_id in (None, "", 0):
        run_id = None
    else:
        run_id = _int(run_id, "run", label="a filter run id")
        run = FilterRun.objects.filter(pk=run_id).first()
        if run is None:
            raise ReleaseError(f"There is no filter run #{run_id}.", "run")
        if run.status != FilterRun.Status.DONE:
            raise ReleaseError(f"Filter run #{run_id} has not finished ({run.get_status_display().lower()}); "
                               "a release needs a finished run.", "run")
        if collections != [run.collection_id]:
            raise ReleaseError(f"Filter run #{run_id} filtered the collection #{run.collection_id} alone; a release "
                               "with a run holds that one collection.", "run")

    origins = _strings(config.get("origins"), "origins")
    valid = set(Caption.Origin.values)
    if bad := [o for o in origins if o not in valid]:
        raise ReleaseError(f"Unknown caption origin {bad[0]!r}; origins are {', '.join(sorted(valid))}.", "origins")
    languages = _strings(config.get("languages"), "languages")
    if bad := [lang for lang in languages if len(lang) > 16]:
        raise ReleaseError(f"{bad[0]!r} is not a language code.", "languages")

    cap = config.get("max_captions_per_image")
    cap = None if cap in (None, "", 0) else _int(cap, "max_captions_per_image", minimum=1)
    dedup = config.get("dedup") or "sha256"
    if dedup not in DEDUP:
        raise ReleaseError(f"dedup must be one of {', '.join(DEDUP)}, not {dedup!r}.", "dedup")
    distance = config.get("phash_distance")
    distance = 4 if distance in (None, "") else _int(distance, "phash_distance", minimum=0)
    if distance > 32:
        raise ReleaseError("phash_distance must be at most 32 bits (of 64).", "phash_distance")

    ratios = config.get("splits")
    if ratios in (None, "", {}):
        ratios = dict(DEFAULT_RATIOS)
    if not isinstance(ratios, dict) or set(ratios) - set(SPLITS):
        raise ReleaseError("splits must be an object with train, val and test shares.", "splits")
    clean = {}
    for name in SPLITS:
        try:
            share = float(ratios.get(name, 0) or 0)
        except (TypeError, ValueError):
            raise ReleaseError(f"The {name} share must be a number.", "splits") from None
        if not 0 <= share <= 1 or share != share:
            raise ReleaseError(f"The {name} share must be between 0 and 1.", "splits")
        clean[name] = round(share, 6)
    if abs(sum(clean.values()) - 1) > 1e-6:
        raise ReleaseError(f"The split shares must add up to 1 (they add up to {sum(clean.values()):g}).", "splits")
    seed = _int(config.get("seed", 0) if config.get("seed") not in (None, "") else 0, "seed")
    hv = config.get("test_human_verified", False)
    if isinstance(hv, str):
        hv = hv.strip().lower() in ("1", "true", "yes", "on")
    if not isinstance(hv, bool):
        raise ReleaseError("test_human_verified must be true or false.", "test_human_verified")
    if hv and clean["test"] == 0:
        raise ReleaseError("A human-verified test split needs a test share above 0.", "test_human_verified")
    missing_image = config.get("missing_image") or "skip"
    if missing_image not in MISSING:
        raise ReleaseError("missing_image must be skip or fail.", "missing_image")

    out = {"collections": collections, "run": run_id,
           "vote_rules": _rules(config.get("vote_rules"), "vote_rules", collections),
           "verified_by": _rules(config.get("verified_by"), "verified_by", collections),
           "origins": origins, "languages": languages, "max_captions_per_image": cap, "dedup": dedup,
           "phash_distance": distance, "splits": clean, "seed": seed, "test_human_verified": hv,
           "missing_image": missing_image}
    return out


# --- the selection ---------------------------------------------------------------------------------

def _clean_text(text: str) -> str:
    """Text PostgreSQL can hold: no NUL, no lone surrogates (other characters are kept; the
    format writers strip what their format cannot hold)."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


class _Selection:
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
            from curation.pipeline.image_filters import HashIndex

            self.phash_index = HashIndex(64, config["phash_distance"])
        self.plan = SplitPlan()
        self.position = 0
        self.pending: list = []
        self.ranges: list[tuple[int, int]] = []  # per image: its first and last position
        self._captions: dict[int, dict] = {}
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
        from annotation.models import Aggregate, Task, Vote
        from curation.models import Caption, FilterDecision, Review, decisions_of_images

        ids = [im["pk"] for im in images]
        captions: dict[int, dict] = {}
        by_image: dict[int, list[dict]] = defaultdict(list)
        for c in (Caption.objects.filter(image_id__in=ids).order_by("image_id", "pk")
                  .values("pk", "image_id", "text", "language", "origin", "parent_id", "source", "metadata__run")):
            captions[c["pk"]] = c
            by_image[c["image_id"]].append(c)

        image_decisions: dict[int, list[dict]] = defaultdict(list)
        caption_decisions: dict[int, list[dict]] = defaultdict(list)
        reviews: dict[int, list[dict]] = defaultdict(list)
        children: dict[int, int] = {}
        if self.run is not None:
            decisions = {}
            for d in (FilterDecision.objects.filter(decisions_of_images(ids, captions), run=self.run)
                      .order_by("step", "pk")
                      .values("pk", "step", "filter_name", "image_id", "caption_id", "outcome", "override", "score",
                              "reason")):
                decisions[d["pk"]] = d
                if d["caption_id"] is None:
                    image_decisions[d["image_id"]].append(d)
                else:
                    caption_decisions[d["caption_id"]].append(d)
            if decisions:
                for r in (Review.objects.filter(decision_id__in=list(decisions)).order_by("created_at", "pk")
                          .values("decision_id", "outcome", "note", "user__username", "created_at")):
                    reviews[r["decision_id"]].append(prov.review_entry(r, decisions[r["decision_id"]]))
            for c in captions.values():
                if c["origin"] == "transformed" and c["parent_id"] and c["metadata__run"] == self.run.pk:
                    children.setdefault(c["parent_id"], c["pk"])  # the lowest id when there are two

        # Votes and aggregates on the captions of this page.
        good_votes: dict[tuple[int, int], int] = {}  # (campaign, caption) -> most GOOD votes on one task
        if self.good_campaigns:
            per_task: dict[tuple, int] = defaultdict(int)
            for task_id, caption_id, campaign_id, worker_id, value, worker_blocked in (
                    Vote.objects.filter(campaign_id__in=self.good_campaigns, role=Task.Role.REAL,
                                        task__role=Task.Role.REAL, task__image_id__in=ids)
                    .values_list("task_id", "task__caption_id", "campaign_id", "worker_id", "value",
                                 "worker__blocked")):
                if caption_id is None or worker_blocked or worker_id in self.blocked[campaign_id]:
                    continue
                label = value.get("label") if isinstance(value, dict) else None
                score = value.get("score") if isinstance(value, dict) else None
                if label == "good" or (isinstance(score, (int, float)) and score >= 50):
                    per_task[(campaign_id, caption_id, task_id)] += 1
            for (campaign_id, caption_id, _task), n in per_task.items():
                key = (campaign_id, caption_id)
                good_votes[key] = max(good_votes.get(key, 0), n)
        aggregates: dict[int, list[tuple[str, dict]]] = defaultdict(list)  # caption -> [(dimension, row)]
        for a in (Aggregate.objects.filter(task__image_id__in=ids, task__role=Task.Role.REAL)
                  .order_by("task__campaign_id", "task_id", "part", "method")
                  .values("task_id", "task__caption_id", "task__campaign_id", "part", "method", "label",
                          "confidence", "n_votes")):
            if a["part"] and ":" in a["part"]:
                cid, dimension = a["part"].split(":", 1)
                if not cid.isdigit():
                    continue
                aggregates[int(cid)].append((dimension, a))
            elif a["task__caption_id"] is not None:
                aggregates[a["task__caption_id"]].append(("", a))

        for image in images:
            self.images_done += 1
            self._image(image, by_image.get(image["pk"], []), captions, children, image_decisions, caption_decisions,
                        reviews, good_votes, aggregates)
        self.flush(force=False)
        if self.progress:
            self.progress(self.images_done, self.images_total)

    # -- per image -----------------------------------------------------------------------------
    def _candidates(self, image, image_captions, children, image_decisions, caption_decisions):
        """[(base caption, released caption, decisions)] of one image."""
        out = []
        if self.run is None:
            for c in image_captions:
                if c["origin"] == "transformed" and "transformed" not in self.origins:
                    continue
                out.append((c, c, []))
            return out
        img_decisions = image_decisions.get(image["pk"], [])
        image_dropped = any((d["override"] or d["outcome"]) == "drop" for d in img_decisions)
        for c in image_captions:
            if c["origin"] == "transformed":
                continue
            own = caption_decisions.get(c["pk"], [])
            seen = bool(own) or (bool(img_decisions) and not self.run_has_caption_steps)
            if not seen:
                continue
            if image_dropped or any((d["override"] or d["outcome"]) == "drop" for d in own):
                continue
            released, hops = c, 0
            while released["pk"] in children and hops < 50:
                released = self._caption(children[released["pk"]])
                hops += 1
            out.append((c, released, img_decisions + own))
        return out

    def _caption(self, pk):
        return self._captions[pk]

    def _rated_ids(self, released: dict, captions: dict) -> list[int]:
        """The released caption and the captions it was transformed from (votes on those count)."""
        ids, node = [], released
        while node is not None and len(ids) < 50:
            ids.append(node["pk"])
            if node["origin"] != "transformed" or not node["parent_id"]:
                break
            node = captions.get(node["parent_id"])
        return ids

    def _rule_holds(self, rule: dict, rated: list[int], good_votes, aggregates) -> bool:
        campaign = rule["campaign"]
        if rule["rule"] in GOOD_RULES:
            need = GOOD_RULES[rule["rule"]]
            return any(good_votes.get((campaign, cid), 0) >= need for cid in rated)
        want = "fluent" if rule["rule"] == "fluent" else rule["label"]
        dimension = rule.get("dimension", "")
        for cid in rated:
            for dim, a in aggregates.get(cid, ()):
                if (a["task__campaign_id"] == campaign and a["method"] == rule["method"]
                        and (dim == dimension or (not dimension and dim == "")) and str(a["label"]) == want):
                    return True
        return False

    def _passed_rating(self, rated: list[int], aggregates) -> bool:
        for cid in rated:
            for dim, a in aggregates.get(cid, ()):
                kind = self.kinds.get(a["task__campaign_id"], "")
                label, method = a["label"], a["method"]
                if kind in ("quality", "informativeness", "good_common_bad") and method == "dawid_skene" \
                        and label == "good":
                    return True
                if kind == "fluency" and method == "consistent" and label == "fluent":
                    return True
                if kind == "informativeness_score" and method == "mean" and isinstance(label, (int, float)) \
                        and label >= 50:
                    return True
        return False

    def _image(self, image, image_captions, captions, children, image_decisions, caption_decisions, reviews,
               good_votes, aggregates):
        self._captions = captions
        config = self.config
        chosen = []
        for base, released, decisions in self._candidates(image, image_captions, children, image_decisions,
                                                          caption_decisions):
            if self.origins and base["origin"] not in self.origins:
                continue
            language = released["language"] or base["language"] or self.collection_language.get(
                image["collection_id"], "")
            if self.languages and language not in self.languages:
                continue
            rated = self._rated_ids(released, captions)
            rules = [{"campaign": r["campaign"], "rule": r["rule"], "satisfied": True} for r in config["vote_rules"]]
            if not all(self._rule_holds(r, rated, good_votes, aggregates) for r in config["vote_rules"]):
                continue
            verified = bool(config["vote_rules"])
            if not verified and config["verified_by"]:
                verified = all(self._rule_holds(r, rated, good_votes, aggregates) for r in config["verified_by"])
                rules += [{"campaign": r["campaign"], "rule": r["rule"], "verified_by": True, "satisfied": verified}
                          for r in config["verified_by"]]
            if not verified and base["origin"] == "crowd":
                verified = self._passed_rating(rated, aggregates)
            chosen.append({"base": base, "released": released, "decisions": decisions, "language": language,
                           "rated": rated, "verified": verified, "rules": rules})
        if not chosen:
            return
        # The image's file.
        if image["status"] != "ready" or not image["file"] or not self._exists(image["file"]):
            why = ("has no file" if not image["file"] else
                   f"is {image['status']}" if image["status"] != "ready" else "is missing from storage")
            message = f"Image #{image['pk']} ({image['file'] or image['external_id'] or 'no file'}) {why}"
            if config["missing_image"] == "fail":
                raise ReleaseError(message + "; the release is set to fail on a missing image.", "missing_image")
            self.report.add("missing_image", message + f"; its {len(chosen)} caption(s) are left out.",
                            image=image["pk"], file=image["file"], captions=len(chosen))
            return
        if config["dedup"] != "none" and image["sha256"]:
            digest = bytes.fromhex(image["sha256"])
            if digest in self.seen_sha:
                self.report.add("duplicate_image", f"Image #{image['pk']} has the same bytes as an image already "
                                f"in the release; its {len(chosen)} caption(s) are left out.", image=image["pk"],
                                sha256=image["sha256"], captions=len(chosen))
                return
            if self.phash_index is not None:
                value = self._phash(image)
                if value is not None:
                    found = self.phash_index.nearest(value)
                    if found is not None:
                        self.report.add("near_duplicate_image",
                                        f"Image #{image['pk']} is within {found[1]} bits (pHash) of image "
                                        f"#{found[0]}; its {len(chosen)} caption(s) are left out.",
                                        image=image["pk"], of=found[0], distance=found[1], captions=len(chosen))
                        return
                    self.phash_index.add(image["pk"], value)
            self.seen_sha.add(digest)
        chosen.sort(key=lambda c: (not c["verified"], c["released"]["pk"]))
        cap = config["max_captions_per_image"]
        if cap and len(chosen) > cap:
            for extra in chosen[cap:]:
                self.report.add("over_cap", f"Caption #{extra['released']['pk']} of image #{image['pk']} is over "
                                f"the cap of {cap} captions per image.", image=image["pk"],
                                caption=extra["released"]["pk"])
            chosen = chosen[:cap]
        first = self.position
        for c in chosen:
            self.pending.append(self._item(image, c, reviews, aggregates))
        self.plan.add(split_key(config["seed"], image["sha256"], image["pk"]), first, any(c["verified"] for c in chosen))
        self.ranges.append((first, self.position - 1))

    def _item(self, image, c, reviews, aggregates):
        from curation.models import ReleaseItem

        released = c["released"]
        chain = prov.lineage(released["pk"], self._captions)
        decision_entries = [prov.decision_entry(d, self.snapshot) for d in c["decisions"]]
        review_entries = [r for d in c["decisions"] for r in reviews.get(d["pk"], ())]
        votes = [prov.vote_entry(a, cid, self.kinds.get(a["task__campaign_id"], ""))
                 for cid in c["rated"] for _dim, a in aggregates.get(cid, ())]
        provenance = prov.build(image=image, caption=released, chain=chain, run=self.run, decisions=decision_entries,
                                reviews=review_entries, votes=votes, rules=c["rules"])
        item = ReleaseItem(
            release=self.release, position=self.position, split="train", image_id=image["pk"],
            image_sha256=image["sha256"] or "", image_file=image["file"] or "", image_format=image["format"] or "",
            width=image["width"], height=image["height"], license=image["license"] or "",
            credit=image["credit"] or "", external_id=image["external_id"] or "", caption_id=released["pk"],
            text=_clean_text(released["text"]), language=c["language"] or "", human_verified=c["verified"],
            provenance=provenance)
        self.position += 1
        return item

    def _exists(self, name: str) -> bool:
        try:
            return default_storage.exists(name)
        except Exception:  # noqa: BLE001 - a storage error reads as a missing file, with the reason logged
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

    def flush(self, force: bool) -> None:
        from curation.models import ReleaseItem

        if self.pending and (force or len(self.pending) >= WRITE_BATCH):
            ReleaseItem.objects.bulk_create(model_provenance.annotate(self.pending, self.run), batch_size=WRITE_BATCH)
            self.pending = []


# --- splits, counts, hash --------------------------------------------------------------------------

def _apply_splits(release, selection: _Selection) -> None:
    """Assign every image's items to its split: one UPDATE per batch of position ranges."""
    from curation.models import ReleaseItem

    assigned = selection.plan.assign(release.config["splits"], release.config["test_human_verified"])
    if not assigned:
        return
    ends = dict(selection.ranges)
    hv = release.config["test_human_verified"]
    by_split = defaultdict(list)
    for first, split in assigned.items():
        by_split[split].append((first, ends[first]))
    table = ReleaseItem._meta.db_table
    for split, ranges in by_split.items():
        ranges.sort()
        for i in range(0, len(ranges), 5000):
            batch = ranges[i:i + 5000]
            only_verified = split == "test" and hv
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute(
                        f"UPDATE {table} AS t SET split = %s FROM unnest(%s::int[], %s::int[]) AS r(lo, hi) "
                        f"WHERE t.release_id = %s AND t.position BETWEEN r.lo AND r.hi"
                        + (" AND t.human_verified" if only_verified else ""),
                        [split, [a for a, _ in batch], [b for _, b in batch], release.pk])
            else:
                for lo, hi in batch:
                    qs = ReleaseItem.objects.filter(release=release, position__gte=lo, position__lte=hi)
                    if only_verified:
                        qs = qs.filter(human_verified=True)
                    qs.update(split=split)


def _finish(release, progress=None) -> None:
    """One pass in position order: counts, content hash, card statistics."""
    import hashlib

    from curation.models import ReleaseItem

    from .card import CardStats, dataset_card

    digest = hashlib.sha256(prov.header_line(release.config))
    stats = CardStats()
    counts = {s: {"images": 0, "captions": 0} for s in SPLITS}
    total_images = 0
    last_image = {s: None for s in SPLITS}
    last_any = None
    done = 0
    total = release.items_total
    for row in (ReleaseItem.objects.filter(release=release).order_by("position")
                .values_list(*prov.ITEM_FIELDS).iterator(chunk_size=WRITE_BATCH)):
        digest.update(prov.item_line(row))
        split, provenance = row[1], row[-1]
        image_key = provenance.get("image")
        counts[split]["captions"] += 1
        if last_image[split] != image_key:
            last_image[split] = image_key
            counts[split]["images"] += 1
        if last_any != image_key:
            last_any = image_key
            total_images += 1
        stats.add(split, row[10], row[11], str(image_key), row[7], row[8], row[12])
        done += 1
        if progress and done % 20000 == 0:
            progress(done, total)
    counts["total"] = {"images": total_images, "captions": done}
    release.counts = counts
    release.content_hash = digest.hexdigest()
    release.card = dataset_card(release, stats)


# --- the entry point ---------------------------------------------------------------------------------

def _fail(release, message: str) -> None:
    from curation.models import Release, ReleaseItem

    ReleaseItem.objects.filter(release=release).delete()
    Release.objects.filter(pk=release.pk).update(status=Release.Status.FAILED, error=message[:5000])
    release.status, release.error = Release.Status.FAILED, message


def freeze(release, progress=None):
    """Run the selection of ``release.config`` once and freeze it (see the module docstring).
    Raises ReleaseError for a frozen release, a bad config, an empty selection or a missing image
    under ``missing_image: fail`` (the release is then FAILED with the message)."""
    from curation.models import Release, ReleaseItem

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
        selection = _Selection(release, config, progress)
        for page in selection.pages():
            selection.process(page)
        selection.flush(force=True)
        if selection.position == 0:
            left = ", ".join(f"{n} {code}" for code, n in sorted(selection.report.counts.items()))
            raise ReleaseError("The selection holds no captions: no caption of these collections passes the run, "
                               "the vote rules, origins and languages" + (f" ({left})" if left else "")
                               + ". Loosen the selection and freeze again.", "collections")
        release.items_total = selection.position
        _apply_splits(release, selection)
        release.report = selection.report.finish()
        _finish(release, progress)
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
