"""What a HIT looks like, before anything is sent to MTurk.

The MTurk constants (the ExternalQuestion schema, the system qualification ids, the worker
submit hosts and id pattern), the layout defaults and their validation, the ExternalQuestion XML
that frames the platform's ``mturk-task`` page, the QualificationRequirements built from a
campaign's ``provider_config``, and ``HitLayoutMixin``: a campaign's validated HIT layout, its
batches of open items and each batch's deterministic ``UniqueRequestToken``.
"""
from __future__ import annotations

import math
import re
from xml.sax.saxutils import escape

from django.conf import settings
from django.urls import reverse

from ...models import Campaign, Task
from ..base import ProviderError

EXTERNAL_QUESTION_XSD = ("http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/"
                         "ExternalQuestion.xsd")
PREVIEW_ASSIGNMENT_ID = "ASSIGNMENT_ID_NOT_AVAILABLE"
QUAL_APPROVAL_RATE = "000000000000000000L0"  # PercentAssignmentsApproved
QUAL_APPROVED_HITS = "00000000000000000040"  # NumberHITsApproved
QUAL_LOCALE = "00000000000000000071"  # Worker_Locale
SUBMIT_HOSTS = ("https://www.mturk.com", "https://workersandbox.mturk.com")
ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,100}$")

DEFAULTS = {
    "tasks_per_assignment": 10,
    "assignment_duration_seconds": 3600,
    "lifetime_seconds": 3 * 86400,
    "auto_approval_delay_seconds": 3 * 86400,
    "frame_height": 800,
    "keywords": "image, caption, rating, labeling",
}


def money_str(cents: int) -> str:
    return f"{int(cents) // 100}.{int(cents) % 100:02d}"


def int_config(config: dict, key: str, *, minimum: int, maximum: int) -> int:
    raw = config.get(key, DEFAULTS.get(key))
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ProviderError(f"MTurk setting {key!r} must be a whole number, not {raw!r}.", code="bad_config") from None
    if not minimum <= value <= maximum:
        raise ProviderError(f"MTurk setting {key!r} must be between {minimum} and {maximum} (it is {value}).",
                            code="bad_config")
    return value


def external_url(campaign: Campaign) -> str:
    base = (settings.PUBLIC_BASE_URL or "").rstrip("/")
    if not base.startswith("https://"):
        raise ProviderError(
            "MTurk only frames HTTPS pages: set PUBLIC_BASE_URL to the https:// address workers reach this "
            f"platform at (it is {base or 'not set'}).", code="bad_config")
    return base + reverse("mturk-task", args=[campaign.pk])


def external_question(url: str, frame_height: int) -> str:
    """The ExternalQuestion XML (MTurk's 2006-07-14 schema) that frames ``url``."""
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<ExternalQuestion xmlns="{EXTERNAL_QUESTION_XSD}">'
            f"<ExternalURL>{escape(url)}</ExternalURL>"
            f"<FrameHeight>{int(frame_height)}</FrameHeight>"
            "</ExternalQuestion>")


def qualification_requirements(campaign: Campaign) -> list[dict]:
    """MTurk QualificationRequirements from ``provider_config["qualifications"]``:
    ``approval_rate`` (percent), ``approved_hits`` (count), ``locales`` (country codes) and
    ``require_own`` (workers must already hold the campaign's own qualification type)."""
    quals = (campaign.provider_config or {}).get("qualifications") or {}
    reqs = []
    if quals.get("approval_rate") not in (None, ""):
        rate = int(quals["approval_rate"])
        if not 0 <= rate <= 100:
            raise ProviderError("The approval rate must be a percentage (0 to 100).", code="bad_config")
        reqs.append({"QualificationTypeId": QUAL_APPROVAL_RATE, "Comparator": "GreaterThanOrEqualTo",
                     "IntegerValues": [rate], "ActionsGuarded": "Accept"})
    if quals.get("approved_hits") not in (None, ""):
        reqs.append({"QualificationTypeId": QUAL_APPROVED_HITS, "Comparator": "GreaterThanOrEqualTo",
                     "IntegerValues": [int(quals["approved_hits"])], "ActionsGuarded": "Accept"})
    locales = quals.get("locales") or []
    if isinstance(locales, str):
        locales = [x for x in re.split(r"[\s,]+", locales) if x]
    if locales:
        bad = [x for x in locales if not re.fullmatch(r"[A-Za-z]{2}", str(x))]
        if bad:
            raise ProviderError(f"Locales are two-letter country codes (e.g. US, GB); not {', '.join(bad)}.",
                                code="bad_config")
        values = [{"Country": str(x).upper()} for x in locales]
        reqs.append({"QualificationTypeId": QUAL_LOCALE, "Comparator": "In" if len(values) > 1 else "EqualTo",
                     "LocaleValues": values, "ActionsGuarded": "Accept"})
    own = (campaign.provider_config or {}).get("qualification_type_id")
    if quals.get("require_own") and own:
        reqs.append({"QualificationTypeId": own, "Comparator": "Exists", "ActionsGuarded": "Accept"})
    return reqs


def hits_needed(n_tasks: int, tasks_per_assignment: int) -> int:
    return math.ceil(n_tasks / max(tasks_per_assignment, 1))


class HitLayoutMixin:
    """The layout half of ``MTurkProvider``: the HIT layout, batches and unique tokens."""

    def layout(self, campaign: Campaign) -> dict:
        """The HIT layout from provider_config, validated (ProviderError "bad_config")."""
        config = campaign.provider_config or {}
        reward = int(campaign.reward_cents or 0)
        if reward < 1:
            raise ProviderError("Set a reward per assignment (at least 1 cent) before publishing on MTurk.",
                                code="bad_config")
        title = str(config.get("title") or campaign.name)[:128]
        description = str(config.get("description") or f"{campaign.kind_spec.label}: {campaign.name}")[:2000]
        return {
            "tasks_per_assignment": int_config(config, "tasks_per_assignment", minimum=1, maximum=1000),
            "max_assignments": int_config({**config, "max_assignments": config.get(
                "max_assignments", campaign.votes_per_item)}, "max_assignments", minimum=1, maximum=1_000_000),
            "duration": int_config(config, "assignment_duration_seconds", minimum=30, maximum=365 * 86400),
            "lifetime": int_config(config, "lifetime_seconds", minimum=30, maximum=365 * 86400),
            "auto_approval": int_config(config, "auto_approval_delay_seconds", minimum=0, maximum=30 * 86400),
            "frame_height": int_config(config, "frame_height", minimum=0, maximum=10000),
            "keywords": str(config.get("keywords") or DEFAULTS["keywords"])[:1000],
            "title": title, "description": description, "reward": reward,
        }

    def batches(self, campaign: Campaign, tasks_per_assignment: int) -> list[list[int]]:
        ids = list(campaign.tasks.filter(role=Task.Role.REAL, status=Task.Status.OPEN)
                   .order_by("position", "pk").values_list("pk", flat=True))
        return [ids[i:i + tasks_per_assignment] for i in range(0, len(ids), tasks_per_assignment)]

    def unique_token(self, campaign: Campaign, round_: int, batch: int) -> str:
        return f"captionlab-c{campaign.pk}-r{round_}-b{batch}"
