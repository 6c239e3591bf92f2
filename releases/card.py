"""The dataset card: Markdown generated with every release.

Counts per split, vocabulary size and tokens per caption (mean, standard deviation, median, as in
Table 3 of the Conceptual Captions paper), languages, licenses and credits, a provenance summary
and the content hash. Tokens come from a simple regex word tokenizer (``TOKEN_RE``: runs of
letters and digits, with an inner apostrophe, lowercased); the card says so.

``CardStats`` is filled row by row (freeze fills it in the same pass that computes the content
hash); ``dataset_card(release)`` streams the items itself when it is not given one.
"""
from __future__ import annotations

import math
import re
from collections import Counter

from .splits import SPLITS

TOKEN_RE = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
CREDITS_LISTED = 200
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~])")


def tokens(text: str) -> list[str]:
    return TOKEN_RE.findall(text.lower())


def md(text) -> str:
    """Inline Markdown text shown literally: special characters escaped, line breaks as spaces."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


class CardStats:
    def __init__(self):
        self.lengths = {s: Counter() for s in SPLITS}  # tokens per caption -> captions
        self.vocabulary: dict[str, set] = {s: set() for s in SPLITS}
        self.languages: Counter = Counter()
        self.licenses: Counter = Counter()  # per image
        self.credits: Counter = Counter()  # per image
        self.verified: Counter = Counter()
        self._last_image: str | None = None

    def add(self, split: str, text: str, language: str, image_key: str, license: str, credit: str,
            human_verified: bool) -> None:
        words = tokens(text)
        self.lengths[split][len(words)] += 1
        self.vocabulary[split].update(words)
        self.languages[language or "unknown"] += 1
        if human_verified:
            self.verified[split] += 1
        if image_key != self._last_image:  # an image's items are contiguous
            self._last_image = image_key
            self.licenses[license or "unknown"] += 1
            if credit:
                self.credits[credit] += 1

    @staticmethod
    def describe(lengths: Counter) -> dict:
        n = sum(lengths.values())
        if not n:
            return {"captions": 0, "mean": None, "std": None, "median": None}
        mean = sum(k * v for k, v in lengths.items()) / n
        var = sum(v * (k - mean) ** 2 for k, v in lengths.items()) / n
        ordered = sorted(lengths.items())

        def nth(i):  # the i-th smallest length, 0-based
            seen = 0
            for k, v in ordered:
                seen += v
                if i < seen:
                    return k
            return ordered[-1][0]

        median = nth(n // 2) if n % 2 else (nth(n // 2 - 1) + nth(n // 2)) / 2
        return {"captions": n, "mean": round(mean, 2), "std": round(math.sqrt(var), 2), "median": median}

    def summary(self) -> dict:
        total = Counter()
        for counter in self.lengths.values():
            total.update(counter)
        vocab_all = set().union(*self.vocabulary.values())
        return {
            "tokens": {**{s: self.describe(self.lengths[s]) for s in SPLITS}, "total": self.describe(total)},
            "vocabulary": {**{s: len(self.vocabulary[s]) for s in SPLITS}, "total": len(vocab_all)},
            "languages": dict(self.languages.most_common()),
            "licenses": dict(self.licenses.most_common()),
            "credits": dict(self.credits.most_common()),
            "verified": dict(self.verified),
        }


def stats_of(release) -> CardStats:
    from releases.models import ReleaseItem

    stats = CardStats()
    for split, text, language, sha, lic, credit, hv in (
            ReleaseItem.objects.filter(release=release).order_by("position")
            .values_list("split", "text", "language", "image_sha256", "license", "credit", "human_verified")
            .iterator(chunk_size=2000)):
        stats.add(split, text, language, sha, lic, credit, hv)
    return stats


def _fmt(value) -> str:
    return "–" if value is None else (f"{value:g}" if isinstance(value, float) else str(value))


def dataset_card(release, stats: CardStats | None = None) -> str:
    stats = stats or stats_of(release)
    s = stats.summary()
    config = release.config or {}
    counts = release.counts or {}
    lines = [f"# {md(release.name)}", ""]
    if release.description:
        lines += [md(release.description), ""]
    lines += ["## Contents", "", "| Split | Images | Captions | Human-verified captions | Vocabulary |",
              "|---|---:|---:|---:|---:|"]
    for split in (*SPLITS, "total"):
        c = counts.get(split, {})
        verified = sum(s["verified"].values()) if split == "total" else s["verified"].get(split, 0)
        lines.append(f"| {split} | {c.get('images', 0)} | {c.get('captions', 0)} | {verified} | "
                     f"{s['vocabulary'][split]} |")
    lines += ["", "An image whose test captions are human-verified may also appear in train with its other captions."
              if config.get("test_human_verified") else "Every image is in exactly one split.", ""]
    lines += ["## Tokens per caption", "",
              "Tokens are counted with a simple regex word tokenizer: lowercased runs of letters and digits "
              "(an inner apostrophe kept, punctuation dropped).", "",
              "| Split | Captions | Mean | Std. dev. | Median |", "|---|---:|---:|---:|---:|"]
    for split in (*SPLITS, "total"):
        t = s["tokens"][split]
        lines.append(f"| {split} | {t['captions']} | {_fmt(t['mean'])} | {_fmt(t['std'])} | {_fmt(t['median'])} |")
    lines += ["", f"Vocabulary size (unique tokens, all splits): {s['vocabulary']['total']}.", ""]
    lines += ["## Languages", ""] + [f"- {md(lang)}: {n} captions" for lang, n in s["languages"].items()] + [""]
    lines += ["## Licenses and credits", "", "Images per license:", ""]
    lines += [f"- {md(lic)}: {n}" for lic, n in s["licenses"].items()] + [""]
    credits = list(s["credits"].items())
    if credits:
        lines += ["Credits (images per credit):", ""]
        lines += [f"- {md(c)} ({n})" for c, n in credits[:CREDITS_LISTED]]
        if len(credits) > CREDITS_LISTED:
            lines.append(f"- and {len(credits) - CREDITS_LISTED} more (see the exports' credit column)")
        lines.append("")
    lines += ["## Selection", ""] + config_summary(config) + [""]
    lines += ["## Provenance", ""] + provenance_summary(config) + [""]
    if release.report:
        codes = Counter()
        for entry in release.report:
            if "count" in entry:  # a summary entry: the code's total
                codes[entry.get("code", "?")] = entry["count"]
            else:
                codes[entry.get("code", "?")] += 1
        lines += ["## Left out", ""] + [f"- {md(code)}: {n}" for code, n in sorted(codes.items())] + [""]
    lines += ["## Content hash", "",
              f"sha256 of the canonical manifest (config and every item, JSON with sorted keys): `{release.content_hash}`",
              ""]
    return "\n".join(lines)


def config_summary(config: dict) -> list[str]:
    from curation.models import Collection

    names = dict(Collection.objects.filter(pk__in=config.get("collections") or []).values_list("pk", "name"))
    out = ["- Collections: " + ", ".join(f"{md(names.get(c, c))} (#{c})" for c in config.get("collections", []))]
    if config.get("run"):
        out.append(f"- Filter run #{config['run']}, curator overrides applied (a caption is in when its final "
                   "outcome is keep or not applicable at every step)")
    for rule in config.get("vote_rules") or []:
        out.append(f"- Vote rule: campaign #{rule['campaign']}, {md(rule['rule'])}"
                   + (f" = {md(rule['label'])}" if rule.get("label") else "") + f" ({md(rule['method'])})")
    for rule in config.get("verified_by") or []:
        out.append(f"- Human-verified when: campaign #{rule['campaign']}, {md(rule['rule'])}"
                   + (f" = {md(rule['label'])}" if rule.get("label") else "") + f" ({md(rule['method'])})")
    if config.get("origins"):
        out.append("- Origins: " + ", ".join(md(o) for o in config["origins"]))
    if config.get("include_model_captions"):
        out.append("- Model-generated captions: included on request, never in the test split")
    if config.get("languages"):
        out.append("- Languages: " + ", ".join(md(o) for o in config["languages"]))
    if config.get("max_captions_per_image"):
        out.append(f"- At most {config['max_captions_per_image']} captions per image")
    dedup = config.get("dedup", "sha256")
    out.append("- Deduplication: " + {"sha256": "identical image bytes (sha256)",
                                      "phash": f"identical bytes and near duplicates (pHash within "
                                               f"{config.get('phash_distance', 4)} bits)",
                                      "none": "none"}.get(dedup, md(dedup)))
    ratios = config.get("splits") or {}
    out.append("- Splits by image: " + ", ".join(f"{k} {ratios.get(k, 0):g}" for k in SPLITS)
               + f", seed {config.get('seed', 0)}"
               + ("; the test split holds only human-verified captions" if config.get("test_human_verified") else ""))
    out.append(f"- Missing image files: {md(config.get('missing_image', 'skip'))}")
    return out


def _pretrained_lines(run) -> list[str]:
    """The model-pack models the run's steps decided with, each with its licence (a release inherits their terms)."""
    from curation.pipeline.model_steps import models_used
    from pack.models import PretrainedModel

    used = models_used(run)
    if not used:
        return []
    licences = {m.key: m.licence for m in PretrainedModel.objects.filter(name__in=[k.split("@")[0] for k in used])}
    return ["", "Pretrained models (model pack): " + "; ".join(
        f"`{key}` (steps {', '.join(map(str, steps))}; licence {md(licences.get(key, 'unknown: no longer registered'))})"
        for key, steps in sorted(used.items()))]


def provenance_summary(config: dict) -> list[str]:
    from curation.models import FilterRun

    out = []
    run = FilterRun.objects.filter(pk=config.get("run")).first() if config.get("run") else None
    if run is not None:
        out.append(f"Filter run #{run.pk}:")
        out.append("")
        for position, step in enumerate(run.snapshot or []):
            out.append(f"{position + 1}. {md(step.get('label') or step.get('filter'))} "
                       f"(`{step.get('filter')}` version {step.get('version')})")
        if run.versions:
            out += ["", "Library and model versions: " + ", ".join(f"{md(k)} {md(v)}" for k, v in
                                                                   sorted(run.versions.items()))]
        out += _pretrained_lines(run)
    else:
        out.append("No filter run: the captions are taken as they are in the collections.")
    campaigns = sorted({r["campaign"] for r in (config.get("vote_rules") or []) + (config.get("verified_by") or [])})
    if campaigns:
        from annotation.models import Campaign

        names = dict(Campaign.objects.filter(pk__in=campaigns).values_list("pk", "name"))
        out += ["", "Campaigns used: " + ", ".join(f"{md(names.get(c, c))} (#{c})" for c in campaigns)]
    out += ["", "Every item's lineage (raw text and transforms), filter decisions with filter versions, curator "
                "overrides and aggregated votes are in its provenance (the JSONL and Parquet exports and the manifest)."]
    return out


__all__ = ["dataset_card", "CardStats", "stats_of", "tokens", "TOKEN_RE"]
