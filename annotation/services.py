"""Campaign writes, called by pages, the API and commands alike: create from a selection,
gold/training/qualification items, members, status changes."""
from __future__ import annotations

import random

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q

from captionlab.roles import ANNOTATOR
from curation.models import Caption, Collection, FilterDecision, FilterRun

from .kinds import KINDS, VoteInvalid, get_kind
from .models import Campaign, GoldAnswer, Membership, Task, Vote, Worker
from .routing import worker_for_user

# The most tasks one campaign takes. A larger selection is never cut silently: it needs an explicit sample
# (the form's "Random sample size", the API's and the campaign command's ``sample``), drawn with its seed
# from the whole selection, or it is refused with its size (``_sampled``).
MAX_TASKS = 200_000
MAX_CANDIDATES = 8
VERIFY_KIND = "verify_rewrite"  # its items are a run's rewrites (annotation.verify_rewrites)
REWRITE_FILTERS = ("hypernymize",)  # the filters whose rewrites a verify_rewrite campaign checks


class CampaignError(Exception):
    def __init__(self, message: str, code: str = "invalid", field: str | None = None):
        super().__init__(message)
        self.message, self.code, self.field = message, code, field


SETTINGS = ("instructions", "annotator_question", "votes_per_item", "dynamic_overlap", "max_votes_per_item",
            "confidence_threshold",
            "gold_rate", "reservation_seconds", "edit_window_seconds", "priority", "qualification_pass_mark",
            "open_to_all", "text_min_chars", "text_max_chars", "text_language", "rate_campaign", "backend",
            "reward_cents", "budget_cents")


def check_settings(fields: dict) -> None:
    def bad(field, message):
        raise CampaignError(message, field=field)

    if "votes_per_item" in fields and not 1 <= int(fields["votes_per_item"]) <= 50:
        bad("votes_per_item", "Votes per item must be between 1 and 50.")
    if "max_votes_per_item" in fields and not 1 <= int(fields["max_votes_per_item"]) <= 50:
        bad("max_votes_per_item", "The maximum votes per item must be between 1 and 50.")
    if "confidence_threshold" in fields and not 0.5 <= float(fields["confidence_threshold"]) <= 1.0:
        bad("confidence_threshold", "The confidence threshold must be between 0.5 and 1.")
    if "gold_rate" in fields and not 0.0 <= float(fields["gold_rate"]) <= 0.5:
        bad("gold_rate", "The gold rate must be between 0 and 0.5.")
    if "reservation_seconds" in fields and not 30 <= int(fields["reservation_seconds"]) <= 86400:
        bad("reservation_seconds", "The reservation timeout must be between 30 seconds and a day.")
    pm = fields.get("qualification_pass_mark")
    if pm is not None and not 0.0 <= float(pm) <= 1.0:
        bad("qualification_pass_mark", "The pass mark is a share between 0 and 1.")
    if "priority" in fields and fields["priority"] not in Campaign.Priority.values:
        bad("priority", f"Priority must be one of {', '.join(Campaign.Priority.values)}.")
    if "text_max_chars" in fields and not 10 <= int(fields["text_max_chars"]) <= 5000:
        bad("text_max_chars", "The caption length limit must be between 10 and 5000 characters.")
    if len(fields.get("instructions") or "") > 50_000:
        bad("instructions", "Instructions are limited to 50,000 characters.")
    if len(fields.get("annotator_question") or "") > 300:
        bad("annotator_question", "The question for annotators is limited to 300 characters.")


def check_selection(run: FilterRun | None, step) -> int:
    """The step a verify_rewrite campaign selects from, or a CampaignError that says what is missing."""
    if run is None:
        raise CampaignError("A verify-rewrite campaign needs a filter run (its hypernymize step's rewrites are "
                            "the items).", field="run")
    if step in (None, ""):
        raise CampaignError("A verify-rewrite campaign needs the run's hypernymize step.", field="step")
    step = int(step)
    snapshot = run.snapshot or []
    if not 0 <= step < len(snapshot):
        raise CampaignError(f"Run #{run.pk} has {len(snapshot)} steps; choose one of them.", field="step")
    name = snapshot[step].get("filter", "?")
    if name not in REWRITE_FILTERS:
        raise CampaignError(f"Step {step} of run #{run.pk} is {name!r}: a verify-rewrite campaign needs a step "
                            f"whose filter is {' or '.join(REWRITE_FILTERS)}.", field="step")
    return step


def select_items(kind_name: str, selection: dict) -> list[dict]:  # noqa: PLR0915
    """The task rows a selection gives: [{image_id, caption_id, candidates, model_score, decision}]. With a
    run and a step, ``reason`` keeps the step's decisions with that reason (e.g. uncertain_rewrite)."""
    kind = get_kind(kind_name)
    try:
        collection = Collection.objects.get(pk=selection.get("collection"))
    except (Collection.DoesNotExist, ValueError, TypeError):
        raise CampaignError("Choose an existing collection.", field="collection") from None
    if kind.target == "pair":  # a run's candidate duplicate pairs (annotation.same_meaning)
        from .same_meaning import pair_items

        return _sample_rows(pair_items({**selection, "collection": collection.pk}), selection)
    run_id = selection.get("run")
    step = selection.get("step")
    outcome = selection.get("outcome") or ""
    lo, hi = selection.get("score_min"), selection.get("score_max")
    origin = selection.get("origin") or ""
    reason = (selection.get("reason") or "").strip()
    if kind.name == VERIFY_KIND and not run_id:
        raise CampaignError("A verify-rewrite campaign needs a filter run (its hypernymize step's rewrites are "
                            "the items).", field="run")
    if reason and (not run_id or step in (None, "")):
        raise CampaignError("Selecting decisions by reason needs a filter run and a step.", field="reason")
    captions = Caption.objects.filter(image__collection=collection, image__status="ready")
    if origin:
        captions = captions.filter(origin=origin)
    scores: dict[int, tuple[float | None, int]] = {}
    if run_id:
        try:
            run = FilterRun.objects.get(pk=run_id, collection=collection)
        except (FilterRun.DoesNotExist, ValueError, TypeError):
            raise CampaignError("That filter run is not a run over this collection.", field="run") from None
        decisions = FilterDecision.objects.filter(run=run, caption__isnull=False)
        if kind.name == VERIFY_KIND:
            check_selection(run, step)
            decisions = decisions.exclude(text_after="")  # only rewrites can be verified
        if step not in (None, ""):
            decisions = decisions.filter(step=int(step))
            if reason:
                decisions = decisions.filter(reason=reason)
            if outcome in ("keep", "drop"):
                decisions = decisions.filter(FilterDecision.final_is(outcome))
            if lo not in (None, ""):
                decisions = decisions.filter(score__gte=float(lo))
            if hi not in (None, ""):
                decisions = decisions.filter(score__lte=float(hi))
            for cid, score, did in decisions.values_list("caption_id", "score", "pk"):
                scores[cid] = (score, did)
            if reason and not scores:
                raise CampaignError(f"No decision of step {step} of run #{run.pk} has the reason {reason!r}"
                                    f"{' with a rewrite' if kind.name == VERIFY_KIND else ''}.", code="empty",
                                    field="reason")
            captions = captions.filter(pk__in=list(scores))
        else:
            dropped = FilterDecision.objects.filter(FilterDecision.final_is("drop"), run=run, caption=OuterRef("pk"))
            seen = FilterDecision.objects.filter(run=run, caption=OuterRef("pk"))
            captions = captions.filter(Exists(seen))
            if outcome == "keep":
                captions = captions.exclude(Exists(dropped))
            elif outcome == "drop":
                captions = captions.filter(Exists(dropped))
    elif lo not in (None, "") or hi not in (None, ""):
        raise CampaignError("A score range needs a filter run and a step.", field="score_min")
    rows: list[dict] = []
    if kind.target == "caption":
        for cid, image_id in _sampled(captions.order_by("pk").values_list("pk", "image_id"), selection, "captions"):
            score, did = scores.get(cid, (None, None))
            rows.append({"image_id": image_id, "caption_id": cid, "candidates": [], "model_score": score,
                         "decision": did})
    elif kind.target == "candidates":
        per_image: dict[int, list[int]] = {}
        for cid, image_id in captions.order_by("image_id", "pk").values_list("pk", "image_id"):
            per_image.setdefault(image_id, []).append(cid)
        for image_id, cids in per_image.items():
            if len(cids) >= 2:
                rows.append({"image_id": image_id, "caption_id": None, "candidates": cids[:MAX_CANDIDATES],
                             "model_score": None, "decision": None})
        if not rows and per_image:
            raise CampaignError("Candidate campaigns need images with at least two captions in the selection.",
                                field="origin")
    else:  # image: write a caption
        if run_id or origin:
            image_ids = captions.order_by("image_id").values_list("image_id", flat=True).distinct()
        else:
            image_ids = collection.images.filter(status="ready").order_by("pk").values_list("pk", flat=True)
        rows = [{"image_id": i, "caption_id": None, "candidates": [], "model_score": None, "decision": None}
                for i in _sampled(image_ids, selection, "images")]
    return _sample_rows(rows, selection)


def _sample_rows(rows: list[dict], selection: dict) -> list[dict]:
    """The selection's random sample of ``rows``, when it asks for one smaller than them."""
    sample = selection.get("sample")
    if sample not in (None, "", 0):
        sample = int(sample)
        if sample < 1:
            raise CampaignError("The sample size must be positive.", field="sample")
        if sample < len(rows):
            rng = random.Random(selection.get("seed", 0))
            rows = sorted(rng.sample(rows, sample), key=lambda r: (r["image_id"], r["caption_id"] or 0))
    return rows


def _sampled(rows, selection: dict, unit: str):
    """The rows of an ordered queryset, all of them when they fit in a campaign (MAX_TASKS); from a larger
    one, the explicit sample the selection asks for, drawn with its seed from every row (streamed: the
    rows are read in order and the drawn positions kept), or a CampaignError that says how many there are
    and how to sample them. Never the first MAX_TASKS of them."""
    total = rows.count()
    if total <= MAX_TASKS:
        return rows
    sample = selection.get("sample")
    if sample in (None, "", 0):
        raise CampaignError(
            f"The selection holds {total:,} {unit}, more than the {MAX_TASKS:,} tasks a campaign takes. Give a "
            f"random sample size of at most {MAX_TASKS:,} (\"Random sample size\" on the form, \"sample\" in the "
            "API, --sample in the campaign command; the seed makes it repeatable), or narrow the selection "
            "(a run's step and outcome, an origin).", code="too_many", field="sample")
    sample = int(sample)
    if not 1 <= sample <= MAX_TASKS:
        raise CampaignError(f"The sample size must be between 1 and {MAX_TASKS:,}.", field="sample")
    wanted = set(random.Random(selection.get("seed", 0)).sample(range(total), sample))
    return [row for position, row in enumerate(rows.iterator(chunk_size=10_000)) if position in wanted]


@transaction.atomic
def campaign_create(*, name: str, kind: str, selection: dict, user=None, members=(), status: str = "draft",
                    **fields) -> Campaign:
    name = (name or "").strip()
    if not name:
        raise CampaignError("A campaign needs a name.", field="name")
    if kind not in KINDS:
        raise CampaignError(f"Unknown campaign kind {kind!r}.", field="kind")
    if Campaign.objects.filter(name=name).exists():
        raise CampaignError(f"A campaign named {name!r} already exists.", code="duplicate", field="name")
    fields = {k: v for k, v in fields.items() if k in SETTINGS and v is not None}
    fields.setdefault("votes_per_item", get_kind(kind).default_votes)
    check_settings(fields)
    rows = select_items(kind, selection)
    if not rows:
        raise CampaignError("The selection holds no items.", code="empty", field="collection")
    campaign = Campaign.objects.create(name=name, kind=kind, collection_id=selection["collection"], created_by=user,
                                       selection={k: v for k, v in selection.items() if v not in (None, "")},
                                       status=status, **fields)
    rng = random.Random(campaign.pk)
    tasks = []
    for position, row in enumerate(rows, start=1):
        tasks.append(Task(campaign=campaign, image_id=row["image_id"], caption_id=row["caption_id"],
                          candidates=row["candidates"], model_score=row["model_score"],
                          source_decision=row["decision"], votes_required=campaign.votes_per_item,
                          position=position, priority=_initial_priority(campaign, position, row["model_score"], rng)))
    Task.objects.bulk_create(tasks, batch_size=2000)
    members_set(campaign, members)
    return campaign


def _initial_priority(campaign: Campaign, position: int, score, rng) -> float:
    if campaign.priority == Campaign.Priority.RANDOM:
        return rng.random()
    if campaign.priority == Campaign.Priority.UNCERTAIN:
        return abs(score - 0.5) if score is not None else 1.0
    if campaign.priority == Campaign.Priority.ENTROPY:
        return 0.0
    return float(position)


def members_set(campaign: Campaign, users) -> int:
    """Add annotators (users or usernames) to a campaign; returns how many were added."""
    User = get_user_model()
    added = 0
    for user in users or ():
        if isinstance(user, str):
            user = User.objects.filter(username=user).first()
            if user is None:
                continue
        worker = worker_for_user(user)
        _, created = Membership.objects.get_or_create(campaign=campaign, worker=worker)
        added += created
    return added


def eligible_annotators():
    return get_user_model().objects.filter(groups__name=ANNOTATOR, is_active=True).order_by("username")


def set_status(campaign: Campaign, status: str) -> Campaign:
    allowed = {
        Campaign.Status.DRAFT: {Campaign.Status.RUNNING},
        Campaign.Status.RUNNING: {Campaign.Status.PAUSED, Campaign.Status.FINISHED},
        Campaign.Status.PAUSED: {Campaign.Status.RUNNING, Campaign.Status.FINISHED},
        Campaign.Status.FINISHED: {Campaign.Status.RUNNING},
    }
    if status not in allowed.get(campaign.status, set()):
        raise CampaignError(f"A {campaign.status} campaign cannot become {status}.", code="bad_status", field="status")
    campaign.status = status
    campaign.save(update_fields=["status", "updated_at"])
    return campaign


@transaction.atomic
def set_gold(task: Task, *, role: str, value, feedback: str = "", tolerance: float = 0.0) -> GoldAnswer:
    """Make a task a gold, training or qualification item with its expected answer."""
    if role not in (Task.Role.GOLD, Task.Role.TRAINING, Task.Role.QUALIFICATION):
        raise CampaignError("Role must be gold, training or qualification.", field="role")
    kind = task.campaign.kind_spec
    if kind.target == "image":
        if role != Task.Role.TRAINING:
            raise CampaignError("Writing campaigns take training examples only (an example caption).", field="role")
        clean = {"text": str(value.get("text") if isinstance(value, dict) else value or "").strip()}
    else:
        try:
            clean = kind.validate(value, task)
        except VoteInvalid as exc:
            raise CampaignError(str(exc), field="value") from None
    if Vote.objects.filter(task=task, role=Task.Role.REAL).exists() and task.role == Task.Role.REAL:
        raise CampaignError("This item already has votes; choose another for gold.", field="task")
    task.role = role
    task.status = Task.Status.OPEN
    task.reserved_count = 0
    task.save(update_fields=["role", "status", "reserved_count"])
    gold, _ = GoldAnswer.objects.update_or_create(task=task, defaults={"value": clean, "feedback": feedback,
                                                                       "tolerance": tolerance})
    return gold


def progress(campaign: Campaign) -> dict:
    """Counts for the dashboard and the API."""
    real = campaign.tasks.filter(role=Task.Role.REAL)
    agg = real.aggregate(total=Count("pk"), done=Count("pk", filter=Q(status=Task.Status.DONE)))
    votes = Vote.objects.filter(campaign=campaign, role=Task.Role.REAL).count()
    required = sum(real.values_list("votes_required", flat=True))
    return {"tasks": agg["total"], "tasks_done": agg["done"], "votes": votes, "votes_required": required,
            "percent": int(100 * agg["done"] / agg["total"]) if agg["total"] else 0}


OPEN_COUNT_SECONDS = 5
OPEN_COUNT_CACHED_ABOVE = 5_000


def open_count_key(campaign_id: int) -> str:
    return f"annotation:open-real:{campaign_id}"


def open_real_tasks(campaign: Campaign) -> int:
    """Open items of the campaign. Every panel shows it, and counting scans the campaign's open
    tasks, so a large campaign's count (over OPEN_COUNT_CACHED_ABOVE) is kept in the cache for
    OPEN_COUNT_SECONDS: "181,234 left" may be a few seconds old; a small campaign's is always exact."""
    from django.core.cache import cache

    key = open_count_key(campaign.pk)
    value = cache.get(key)
    if value is None:
        value = campaign.tasks.filter(role=Task.Role.REAL, status=Task.Status.OPEN).count()
        if value > OPEN_COUNT_CACHED_ABOVE:
            cache.set(key, value, timeout=OPEN_COUNT_SECONDS)
    return value


def worker_progress(campaign: Campaign, worker: Worker) -> dict:
    """The worker's votes, and the open items they have not voted on. The second figure is the
    campaign's open items (cached) less this worker's votes on open items (the worker's own vote
    index), so its cost follows the worker's votes, not the campaign's size."""
    from django.db.models import Count, Q

    mine = Vote.objects.filter(campaign=campaign, worker=worker).aggregate(
        done=Count("pk", filter=Q(role__in=(Task.Role.REAL, Task.Role.GOLD))),
        open=Count("pk", filter=Q(role=Task.Role.REAL, task__status=Task.Status.OPEN)))
    return {"done": mine["done"], "remaining": max(open_real_tasks(campaign) - mine["open"], 0)}


__all__ = ["CampaignError", "campaign_create", "select_items", "members_set", "set_status", "set_gold", "progress",
           "worker_progress", "eligible_annotators"]
