"""A release's config: ``validate_config`` checks every setting (collections, run, vote rules,
origins, model captions, languages, caps, deduplication, splits, seed) and returns the normalised config the
freeze runs on, or raises ReleaseError naming the field at fault. The rule names and methods it
accepts live here too (``GOOD_RULES``, ``RULES``, ``RULE_METHODS``)."""
from __future__ import annotations

from . import ReleaseError
from .splits import DEFAULT_RATIOS, SPLITS

CONFIG_KEYS = {"collections", "run", "vote_rules", "verified_by", "origins", "languages", "max_captions_per_image",
               "dedup", "phash_distance", "splits", "seed", "test_human_verified", "missing_image",
               "include_model_captions"}
GOOD_RULES = {"good_1plus": 1, "good_2plus": 2, "good_3plus": 3}
RULES = (*GOOD_RULES, "fluent", "label")
RULE_METHODS = ("majority", "dawid_skene", "consistent", "glad", "mace", "mean")
DEDUP = ("sha256", "phash", "none")
MISSING = ("skip", "fail")


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


def _bool(value, field: str) -> bool:
    if isinstance(value, str):
        value = value.strip().lower() in ("1", "true", "yes", "on")
    if value is None:
        value = False
    if not isinstance(value, bool):
        raise ReleaseError(f"{field} must be true or false.", field)
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


def validate_config(config: dict) -> dict:  # noqa: PLR0915
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
    hv = _bool(config.get("test_human_verified", False), "test_human_verified")
    if hv and clean["test"] == 0:
        raise ReleaseError("A human-verified test split needs a test share above 0.", "test_human_verified")
    include_model = _bool(config.get("include_model_captions", False), "include_model_captions")
    # Ticking the "model" origin is as explicit an ask as the switch itself, so it counts as one.
    include_model = include_model or "model" in origins
    missing_image = config.get("missing_image") or "skip"
    if missing_image not in MISSING:
        raise ReleaseError("missing_image must be skip or fail.", "missing_image")

    out = {"collections": collections, "run": run_id,
           "vote_rules": _rules(config.get("vote_rules"), "vote_rules", collections),
           "verified_by": _rules(config.get("verified_by"), "verified_by", collections),
           "origins": origins, "languages": languages, "max_captions_per_image": cap, "dedup": dedup,
           "phash_distance": distance, "splits": clean, "seed": seed, "test_human_verified": hv,
           "missing_image": missing_image, "include_model_captions": include_model}
    return out


__all__ = ["validate_config", "CONFIG_KEYS", "GOOD_RULES", "RULES", "RULE_METHODS", "DEDUP", "MISSING"]
