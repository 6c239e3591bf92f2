"""The curator's controls of a campaign's crowd: provider, reward, budget, places, provider
settings and review rules. One validation for the create form, the crowd settings page, the API
and ``manage.py campaign``; a bad value is a ``CampaignError`` naming its field.

Where they live: ``Campaign.backend``, ``reward_cents`` and ``budget_cents`` are columns; the
rest is ``Campaign.provider_config``:

- ``places`` (link-out): how many participants are admitted; the start page refuses the next one;
- ``tasks_per_assignment``: items per participant / HIT (link-out: 0 = all);
- MTurk: ``max_assignments``, ``assignment_duration_seconds``, ``lifetime_seconds``,
  ``auto_approval_delay_seconds``, ``frame_height``, ``title``, ``description``, ``keywords``,
  ``qualifications`` (``approval_rate``, ``approved_hits``, ``locales``, ``require_own``);
- link-out: ``participant_param``, ``study_param``, ``session_param``, ``consent``,
  ``completion_code``, ``completion_code_per_assignment``, ``completion_url``, ``minutes``,
  ``fee_rate``, ``api`` ("" or "prolific"), ``public_base_url``;
- ``review``, the review rules: ``auto_approve`` (false: hold every submission for the curator),
  ``min_gold_accuracy`` (reject an assignment below it), ``block_below_gold_accuracy`` with
  ``block_min_gold`` (block a worker below it once they answered that many gold items; every
  provider, in-house included: ``annotation.quality``), ``min_seconds_per_task``,
  ``min_agreement``, ``approve_feedback``, ``reject_feedback``, ``bonus_cents``,
  ``bonus_min_gold_accuracy``, ``bonus_reason``, ``notify_subject``, ``notify_message``, ``manual``;
- ``tie_break`` (every provider): how a tied majority is reported (``annotation.aggregation``).

Keys the platform writes itself (``publish_progress``, ``last_sync``, ``study_id``...) are kept
as they are; any other key is refused, so a typo is an error, not a silently ignored setting.

Mechanical Turk closed to requesters on 2026-09-30 (AWS's MTurk API reference); it is offered,
labelled so, for an MTurk-compatible endpoint configured in ``MTURK_ENDPOINT_URL``.
"""
from __future__ import annotations

import re
from decimal import Decimal

from django.db import transaction

from ..models import Campaign, LedgerEntry
from ..services import CampaignError
from . import money
from .errors import ProviderError
from .linkout import admitted, check_completion_url

MTURK_CLOSED = ("closed by Amazon since 2026-09-30: usable only against an MTurk-compatible endpoint set in "
                "MTURK_ENDPOINT_URL")
PROVIDER_HELP = ("In-house: the platform's own annotators, unpaid. Link-out: a marketplace such as Prolific sends "
                 f"participants to a start URL. Amazon Mechanical Turk: {MTURK_CLOSED}.")
MAX_REWARD_CENTS = 100_000  # 1,000.00 per assignment
MAX_BUDGET_CENTS = 100_000_000  # 1,000,000.00
MAX_PLACES = 100_000
CONTROL_FIELDS = ("backend", "reward_cents", "budget_cents", "places", "provider_config", "review")

SYSTEM_KEYS = {"publish_progress", "publish_round", "last_sync", "qualification_type_id", "qualification_granted",
               "study_id"}
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,39}$")
CODE_RE = re.compile(r"^[A-Za-z0-9_-]{4,40}$")
DAY = 86400


def provider_choices() -> list[tuple[str, str]]:
    """The providers as a curator chooses them, Mechanical Turk marked closed."""
    labels = {Campaign.Backend.MTURK: f"Amazon Mechanical Turk ({MTURK_CLOSED})"}
    return [(value, labels.get(value, label)) for value, label in Campaign.Backend.choices]


def provider_note(backend: str) -> str:
    """What a page says next to the campaign's provider ("" for an open one)."""
    return f"Mechanical Turk is {MTURK_CLOSED}." if backend == Campaign.Backend.MTURK else ""


# --- one value at a time ----------------------------------------------------------------------------


def _bad(field: str, message: str):
    raise CampaignError(message, field=field)


def _whole(value, field: str, label: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or value in (None, ""):
        _bad(field, f"{label} must be a whole number.")
    try:
        number = int(value) if not isinstance(value, float) or value.is_integer() else None
    except (TypeError, ValueError):
        number = None
    if number is None:
        _bad(field, f"{label} must be a whole number, not {str(value)[:40]!r}.")
    if number < 0 and lo >= 0:
        _bad(field, f"{label} cannot be negative.")
    if not lo <= number <= hi:
        _bad(field, f"{label} must be between {lo:,} and {hi:,} (it is {number:,}).")
    return number


def _amount(value, field: str, label: str, limit: int) -> int:
    """Cents: whole, not negative, not absurd (the message gives money, e.g. 1,000.00)."""
    cents = _whole(value, field, f"{label} (in cents)", -10**12, 10**12)
    if cents < 0:
        _bad(field, f"{label} cannot be negative.")
    if cents > limit:
        _bad(field, f"{label} of {_money(cents)} is more than the {_money(limit)} allowed.")
    return cents


def _share(value, field: str, label: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        _bad(field, f"{label} must be a share between 0 and 1, such as 0.7.")
    if isinstance(value, bool) or not 0.0 <= number <= 1.0:
        _bad(field, f"{label} must be a share between 0 and 1, such as 0.7 (it is {value}).")
    return number


def _text(value, field: str, label: str, limit: int) -> str:
    if not isinstance(value, str):
        _bad(field, f"{label} must be text.")
    if len(value) > limit:
        _bad(field, f"{label} is limited to {limit:,} characters.")
    return value


def _flag(value, field: str, label: str) -> bool:
    if not isinstance(value, bool):
        _bad(field, f"{label} must be true or false.")
    return value


def _money(cents: int) -> str:
    return f"{cents / 100:,.2f}"


REVIEW_RULES = {  # key: (kind, label, limit)
    "auto_approve": ("flag", "Auto-approve", None),
    "manual": ("flag", "Manual review", None),
    "min_gold_accuracy": ("share", "The gold accuracy an assignment needs", None),
    "block_below_gold_accuracy": ("share", "The gold accuracy below which a worker is blocked", None),
    "block_min_gold": ("whole", "The gold items a worker answers before the block rule applies", (1, 10_000)),
    "min_seconds_per_task": ("whole", "The minimum seconds per task", (0, 3600)),
    "min_agreement": ("share", "The agreement an assignment needs", None),
    "approve_feedback": ("text", "The approval feedback", 1024),
    "reject_feedback": ("text", "The rejection feedback", 1024),
    "bonus_cents": ("whole", "The bonus", (0, MAX_REWARD_CENTS)),
    "bonus_min_gold_accuracy": ("share", "The gold accuracy a bonus needs", None),
    "bonus_reason": ("text", "The bonus reason", 1024),
    "notify_subject": ("text", "The notification subject", 200),
    "notify_message": ("text", "The notification message", 4096),
}


def clean_review(rules, field: str = "review") -> dict:
    if rules in (None, ""):
        return {}
    if not isinstance(rules, dict):
        _bad(field, "The review rules must be an object, e.g. {\"auto_approve\": true, "
                    "\"block_below_gold_accuracy\": 0.6, \"block_min_gold\": 5}.")
    unknown = sorted(set(rules) - set(REVIEW_RULES))
    if unknown:
        _bad(field, f"Unknown review rule {', '.join(map(repr, unknown))}; the rules are "
                    f"{', '.join(REVIEW_RULES)}.")
    clean = {}
    for key, value in rules.items():
        if value is None:
            continue
        kind, label, limit = REVIEW_RULES[key]
        if kind == "flag":
            clean[key] = _flag(value, field, label)
        elif kind == "share":
            clean[key] = _share(value, field, label)
        elif kind == "whole":
            clean[key] = _whole(value, field, label, *limit)
        else:
            clean[key] = _text(value, field, label, limit)
    return clean


PROVIDER_SETTINGS = {  # key: (kind, label, limit); which provider reads it is in the module docstring
    "places": ("whole", "Places", (0, MAX_PLACES)),
    "tasks_per_assignment": ("whole", "Tasks per assignment", (0, 1000)),
    "max_assignments": ("whole", "Assignments per HIT", (1, 1_000_000)),
    "assignment_duration_seconds": ("whole", "The assignment duration", (30, 365 * DAY)),
    "lifetime_seconds": ("whole", "The HIT lifetime", (30, 365 * DAY)),
    "auto_approval_delay_seconds": ("whole", "The auto-approval delay", (0, 30 * DAY)),
    "frame_height": ("whole", "The frame height", (0, 10_000)),
    "title": ("text", "The title", 128),
    "description": ("text", "The description", 2000),
    "keywords": ("text", "The keywords", 1000),
    "qualifications": ("object", "Qualifications", None),
    "participant_param": ("name", "The participant id parameter", None),
    "study_param": ("name", "The study id parameter", None),
    "session_param": ("name", "The session id parameter", None),
    "consent": ("text", "The consent text", 20_000),
    "completion_code": ("code", "The completion code", None),
    "completion_code_per_assignment": ("flag", "A completion code per participant", None),
    "completion_url": ("url", "The completion URL", None),
    "minutes": ("whole", "The study's minutes", (1, 24 * 60)),
    "fee_rate": ("rate", "The fee rate", None),
    "api": ("api", "The marketplace API", None),
    "public_base_url": ("text", "The public base URL", 200),
    "review": ("review", "The review rules", None),
    "tie_break": ("tie_break", "The tie-break rule", None),  # read by annotation.aggregation.per_task
}


def _clean_qualifications(value, field: str) -> dict:
    if not isinstance(value, dict):
        _bad(field, "Qualifications must be an object such as {\"approval_rate\": 95, \"locales\": [\"US\"]}.")
    unknown = sorted(set(value) - {"approval_rate", "approved_hits", "locales", "require_own"})
    if unknown:
        _bad(field, f"Unknown qualification {', '.join(map(repr, unknown))}; use approval_rate, approved_hits, "
                    "locales, require_own.")
    clean = dict(value)
    if value.get("approval_rate") not in (None, ""):
        clean["approval_rate"] = _whole(value["approval_rate"], field, "The approval rate (percent)", 0, 100)
    if value.get("approved_hits") not in (None, ""):
        clean["approved_hits"] = _whole(value["approved_hits"], field, "The approved HITs", 0, 10_000_000)
    locales = value.get("locales") or []
    if isinstance(locales, str):
        locales = [x for x in re.split(r"[\s,]+", locales) if x]
    if not isinstance(locales, list) or any(not re.fullmatch(r"[A-Za-z]{2}", str(x)) for x in locales):
        _bad(field, "Locales are two-letter country codes, e.g. [\"US\", \"GB\"].")
    if locales:
        clean["locales"] = [str(x).upper() for x in locales]
    if "require_own" in value:
        clean["require_own"] = _flag(value["require_own"], field, "require_own")
    return clean


def clean_provider_config(config, field: str = "provider_config") -> dict:  # noqa: PLR0915
    """The provider settings, every key known and every value in range."""
    if config in (None, ""):
        return {}
    if not isinstance(config, dict):
        _bad(field, "The provider settings must be a JSON object, e.g. {\"tasks_per_assignment\": 10}.")
    unknown = sorted(set(config) - set(PROVIDER_SETTINGS) - SYSTEM_KEYS)
    if unknown:
        _bad(field, f"Unknown provider setting {', '.join(map(repr, unknown))}; the settings are "
                    f"{', '.join(PROVIDER_SETTINGS)}.")
    clean = {}
    for key, value in config.items():
        if key in SYSTEM_KEYS:
            clean[key] = value
            continue
        kind, label, limit = PROVIDER_SETTINGS[key]
        if value is None:
            continue
        if kind == "whole":
            clean[key] = _whole(value, field, label, *limit)
        elif kind == "text":
            clean[key] = _text(value, field, label, limit)
        elif kind == "flag":
            clean[key] = _flag(value, field, label)
        elif kind == "name":
            if not isinstance(value, str) or not NAME_RE.match(value):
                _bad(field, f"{label} must be a query parameter name (letters, digits, _), not {str(value)[:40]!r}.")
            clean[key] = value
        elif kind == "code":
            if value != "" and (not isinstance(value, str) or not CODE_RE.match(value)):
                _bad(field, "The completion code must be 4 to 40 letters, digits, - or _.")
            clean[key] = value
        elif kind == "url":
            if value != "":
                try:
                    check_completion_url(_text(value, field, label, 500))
                except ProviderError as exc:
                    _bad(field, exc.message)
            clean[key] = value
        elif kind == "rate":
            try:
                rate = float(value)
            except (TypeError, ValueError):
                rate = -1.0
            if isinstance(value, bool) or not 0.0 <= rate <= 5.0:
                _bad(field, "The fee rate is a share of each payment from 0 to 5, such as 0.33.")
            clean[key] = rate
        elif kind == "api":
            if value not in ("", "prolific"):
                _bad(field, "The marketplace API is \"\" (none: CSV files) or \"prolific\".")
            clean[key] = value
        elif kind == "object":
            clean[key] = _clean_qualifications(value, field)
        elif kind == "tie_break":
            from ..aggregation.per_task import validate_tie_break

            try:
                clean[key] = validate_tie_break(value)
            except ValueError as exc:
                _bad(field, f"{exc}.")
        else:
            clean[key] = clean_review(value, field)
    return clean


# --- the whole set, and what the campaign's state allows ---------------------------------------------


def _one_assignment_cents(backend: str, reward: int, config: dict, votes_per_item: int, campaign=None) -> tuple:
    """(cents, words) the smallest publication costs: one HIT (MTurk) or every place (link-out)."""
    if backend == Campaign.Backend.MTURK:
        n = int(config.get("max_assignments") or votes_per_item or 1)
        amount = reward * n
        fee = money.fee_cents("mturk", amount, "reward", n, campaign)
        return amount + fee, (f"one HIT of {n} assignment{'s' if n != 1 else ''} x {_money(reward)} + "
                              f"{_money(fee)} MTurk fee = {_money(amount + fee)}")
    places = int(config.get("places") or 0)
    n = places or 1
    amount = reward * n
    rate = config.get("fee_rate")
    fee = (money.to_cents(Decimal(amount) * Decimal(str(rate))) if rate not in (None, "")
           else money.fee_cents("linkout", amount, "reward", 1))
    what = f"{places} places" if places else "one participant"
    return amount + fee, f"{what} x {_money(reward)} + {_money(fee)} fee = {_money(amount + fee)}"


def clean_controls(values: dict, campaign: Campaign | None = None, *, votes_per_item: int | None = None) -> dict:
    """The complete controls after ``values`` (any of CONTROL_FIELDS; absent or None: unchanged, or
    the default for a new campaign): {"backend", "reward_cents", "budget_cents", "provider_config"}.
    Raises CampaignError with the field to fix."""
    values = {k: v for k, v in (values or {}).items() if k in CONTROL_FIELDS and v is not None}
    old_config = dict(campaign.provider_config or {}) if campaign is not None else {}
    backend = values.get("backend", campaign.backend if campaign else Campaign.Backend.INHOUSE)
    if backend not in Campaign.Backend.values:
        _bad("backend", f"Unknown crowd provider {str(backend)[:40]!r}; choose one of "
                        f"{', '.join(Campaign.Backend.values)}.")
    reward = _amount(values["reward_cents"], "reward_cents", "The reward", MAX_REWARD_CENTS) \
        if "reward_cents" in values else (campaign.reward_cents if campaign else 0)
    budget = _amount(values["budget_cents"], "budget_cents", "The budget", MAX_BUDGET_CENTS) \
        if "budget_cents" in values else (campaign.budget_cents if campaign else 0)
    if "provider_config" in values:
        config = clean_provider_config(values["provider_config"])
        config.update({k: v for k, v in old_config.items() if k in SYSTEM_KEYS})
        if "review" not in values["provider_config"] and "review" in old_config:
            config["review"] = old_config["review"]
    else:
        config = old_config
    if "review" in values:  # merged into the rules kept; a rule given as None is removed
        review = {k: v for k, v in (config.get("review") or {}).items()
                  if not (isinstance(values["review"], dict) and k in values["review"])}
        config["review"] = {**review, **clean_review(values["review"])}
    if "places" in values:
        places = _whole(values["places"], "places", "Places", 0, MAX_PLACES)
        if places and backend != Campaign.Backend.LINKOUT:
            _bad("places", "Places count link-out participants; MTurk's is max_assignments in the provider settings.")
        config["places"] = places
        if not places and backend != Campaign.Backend.LINKOUT:
            config.pop("places")
    votes = votes_per_item or (campaign.votes_per_item if campaign else 3)
    if backend == Campaign.Backend.MTURK:
        if reward < 1:
            _bad("reward_cents", "Mechanical Turk needs a reward above 0: at least 1 cent per assignment.")
        if "tasks_per_assignment" in config and int(config["tasks_per_assignment"]) < 1:
            _bad("provider_config", "An MTurk HIT needs at least 1 task per assignment (tasks_per_assignment).")
    if backend != Campaign.Backend.INHOUSE and reward > 0:
        need, words = _one_assignment_cents(backend, reward, config, votes, campaign)
        if budget < need:
            _bad("budget_cents", f"The budget ({_money(budget)}) does not cover the first publication: {words}. "
                                 "Raise the budget or lower the reward.")
    return {"backend": backend, "reward_cents": reward, "budget_cents": budget, "provider_config": config}


def _check_change(campaign: Campaign, clean: dict) -> None:
    """What a campaign that has published or paid may no longer change."""
    launched = campaign.provider_jobs.exists() or LedgerEntry.objects.filter(campaign=campaign).exists()
    if clean["backend"] != campaign.backend and (launched or campaign.assignments.exclude(
            worker__provider=Campaign.Backend.INHOUSE).exists()):
        _bad("backend", "The provider cannot change once work was published or paid; create a new campaign.")
    if clean["reward_cents"] != campaign.reward_cents and launched:
        _bad("reward_cents", "The reward cannot change after launch: workers accepted the work at the old one.")
    used = money.ledger_totals(campaign.pk)
    if clean["budget_cents"] < used:
        _bad("budget_cents", f"The budget cannot go below the {_money(used)} already committed or paid.")
    old_places = int((campaign.provider_config or {}).get("places") or 0)
    new_places = int(clean["provider_config"].get("places") or 0)
    if new_places != old_places and campaign.provider_jobs.filter(provider="linkout").exists():
        _bad("places", "Add places to a launched study with Extend on the provider page: it commits their reward.")
    if new_places and new_places < admitted(campaign):
        _bad("places", f"{admitted(campaign)} participants are admitted already; places cannot go below that.")


def create_campaign(*, controls: dict, **create) -> Campaign:
    """``services.campaign_create`` with the crowd controls validated first (one transaction)."""
    from .. import services

    votes = create.get("votes_per_item")
    if votes is None:
        from ..kinds import KINDS

        spec = KINDS.get(create.get("kind"))
        votes = spec.default_votes if spec else 3
    clean = clean_controls(controls, votes_per_item=votes)
    with transaction.atomic():
        campaign = services.campaign_create(**create, backend=clean["backend"], reward_cents=clean["reward_cents"],
                                            budget_cents=clean["budget_cents"])
        if clean["provider_config"]:
            campaign.provider_config = clean["provider_config"]
            campaign.save(update_fields=["provider_config", "updated_at"])
    return campaign


def update_controls(campaign: Campaign, values: dict) -> Campaign:
    """Change the controls of an existing campaign, under its row lock (money.commit's lock, so
    a budget cannot drop under a commitment being written)."""
    with transaction.atomic():
        locked = Campaign.objects.select_for_update(no_key=True).get(pk=campaign.pk)
        clean = clean_controls(values, locked)
        _check_change(locked, clean)
        for name, value in clean.items():
            setattr(locked, name, value)
        locked.save(update_fields=[*clean, "updated_at"])
    for name, value in clean.items():
        setattr(campaign, name, value)
    return campaign


def review_rules(campaign: Campaign) -> dict:
    return dict((campaign.provider_config or {}).get("review") or {})


__all__ = ["clean_controls", "clean_provider_config", "clean_review", "create_campaign", "update_controls",
           "provider_choices", "provider_note", "admitted", "review_rules", "MTURK_CLOSED", "PROVIDER_HELP",
           "CONTROL_FIELDS", "REVIEW_RULES", "PROVIDER_SETTINGS"]
