"""Curator pages of the learning loop (modeling.loop): the list of loops, a loop's page (settings, the
"Next round" button, the live round, the rounds table and the learning curve), and the form on a
fluency campaign's page that starts a loop.

Thin like modeling/views.py: parse, check the role, call one service (modeling.loop.services), render.
A LoopError comes back on the page it came from (409 for a round already open, 400 for bad input),
never as a 500. The live block (current round, rounds table, curve) polls itself with htmx while a
round is queued or running and is rendered without a trigger once none is, so the polling stops.
"""
from __future__ import annotations

from django.contrib import messages
from django.db.models import Count
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_POST

from captionlab.roles import role_required

from . import verdicts
from .loop import services
from .loop.charts import curve_numbers, learning_curve_svg, quality_svg, trained_on
from .loop.services import LoopError
from .models import LearningLoop, LoopRound, Sampler

STAGES = ("aggregating", "training", "evaluating", "rescoring", "prioritising")
SETTINGS = ("sampler", "random_share", "batch_size", "auto_every_votes")
CREATE = SETTINGS + ("holdout_source", "holdout_fraction")
CASTS = {"sampler": str, "holdout_source": str, "random_share": float, "holdout_fraction": float,
         "batch_size": int, "auto_every_votes": int}
NUMBER_HINTS = {float: "A number, e.g. 0.3.", int: "A whole number, e.g. 40."}


def sampler_choices() -> list[tuple[str, str, str]]:
    """(value, short name for the select, the model's full description for its title)."""
    return [(value, label.split(":")[0].split(" (")[0], label) for value, label in Sampler.choices]


def field_help() -> dict:
    """The model's own words for each setting (they follow the samplers as those change)."""
    return {name: LearningLoop._meta.get_field(name).help_text for name in CREATE}


def form_defaults() -> dict:
    """The create form's initial values: the model's own defaults."""
    return {name: LearningLoop._meta.get_field(name).default for name in CREATE}


def parse_loop_form(post, names) -> tuple[dict, dict]:
    """-> (values, errors): the fields of ``names`` present in ``post`` cast to their types; blank
    fields are left out (the service keeps its default or the current value)."""
    values, errors = {}, {}
    for name in names:
        raw = (post.get(name) or "").strip()
        if not raw:
            continue
        try:
            values[name] = CASTS[name](raw)
        except ValueError:
            errors[name] = NUMBER_HINTS[CASTS[name]]
    return values, errors


def _error_field(exc: LoopError) -> str:
    # services._check_options names "batch_size" for its batch / random share / every-N message.
    return exc.field or "form"


# --- The loop page ---------------------------------------------------------------------------------


def _loop(pk) -> LearningLoop:
    return get_object_or_404(LearningLoop.objects.select_related("campaign", "created_by"), pk=pk)


def worker_lost(round_: LoopRound) -> bool:
    """Failed by the sweep (its worker stopped beating, or none took it) or by a broker that refused it."""
    return round_.status == LoopRound.Status.FAILED and round_.stage == "lost"


def _stages(round_: LoopRound) -> list[dict]:
    """Each stage of the round with its state: done, current or todo (all done once the round is)."""
    if round_.status == LoopRound.Status.DONE:
        return [{"name": s, "state": "done"} for s in STAGES]
    at = STAGES.index(round_.stage) if round_.stage in STAGES else -1
    failed = round_.status == LoopRound.Status.FAILED
    return [{"name": s, "state": "done" if i < at else ("failed" if failed else "current") if i == at else "todo"}
            for i, s in enumerate(STAGES)]


def _decorate(round_: LoopRound, now) -> LoopRound:
    holdout = round_.holdout or {}
    round_.lost = worker_lost(round_)
    round_.stale = services.is_stale(round_, now)
    round_.stage_list = _stages(round_)
    round_.beat_seconds = int((now - round_.heartbeat_at).total_seconds()) if round_.heartbeat_at else None
    round_.scores = {who: (holdout.get(who) or {}).get("macro_f1") for who in ("new", "previous", "majority")}
    round_.holdout_n = holdout.get("n")
    round_.trained_on = trained_on(round_)
    round_.verdict = verdicts.display(round_.version.metrics) if round_.version_id else None
    return round_


def _series_name(numbers: dict) -> str:
    # Named by how the labels were chosen (round 1's in the campaign's own order, later ones by the sampler
    # that re-ordered the queue), never by a sampler that chose none of them.
    used = list(dict.fromkeys(p.get("chosen_by") or p["sampler"] for p in numbers["sampler"]))
    return "versions, labels chosen by " + ", then ".join(used)


def loop_context(loop: LearningLoop, **extra) -> dict:
    now = timezone.now()
    rounds = [_decorate(r, now) for r in loop.rounds.select_related("version", "previous_version", "training_run",
                                                                      "created_by").order_by("number")]
    numbers = curve_numbers(rounds)
    open_round = next((r for r in rounds if not r.finished), None)
    return {
        "loop": loop, "campaign": loop.campaign, "rounds": rounds, "open_round": open_round,
        "current": open_round or (rounds[-1] if rounds else None),
        "numbers": numbers, "random": numbers["random"],
        "curve": learning_curve_svg(numbers, sampler_name=_series_name(numbers)),
        "quality": quality_svg(numbers),
        "verdict_rule": verdicts.RULE, "samplers": sampler_choices(), "help": field_help(), "holdout_size": len(loop.holdout_tasks or []),
        "settings_data": {name: getattr(loop, name) for name in SETTINGS}, "settings_errors": {},
        **extra,
    }


@role_required("curator")
def loop_list(request):
    loops = list(LearningLoop.objects.select_related("campaign").annotate(n_rounds=Count("rounds")).order_by("-pk"))
    latest = {}
    for r in LoopRound.objects.filter(loop__in=loops).select_related("version").order_by("loop_id", "number"):
        latest[r.loop_id] = r  # the last one per loop wins (a loop has tens of rounds, not thousands)
    for loop in loops:
        loop.latest = latest.get(loop.pk)
    return render(request, "modeling/loop_list.html", {"loops": loops})


@role_required("curator")
@require_GET
def loop_detail(request, pk):
    loop = _loop(pk)
    services.sweep_stale(loop)  # a round whose worker died shows as lost now, not two minutes later
    return render(request, "modeling/loop_detail.html", loop_context(loop))


@role_required("curator")
@require_GET
def loop_live(request, pk):
    """The live block alone (htmx polling); a plain GET goes to the page."""
    loop = _loop(pk)
    if not request.htmx:
        return redirect(loop)
    services.sweep_stale(loop)
    response = render(request, "modeling/_loop_live.html", loop_context(loop))
    patch_vary_headers(response, ("HX-Request",))
    return response


@require_POST
@role_required("curator")
def loop_next_round(request, pk):
    loop = _loop(pk)
    try:
        round_ = services.round_start(loop, user=request.user)
    except LoopError as exc:
        return render(request, "modeling/loop_detail.html", loop_context(loop, round_error=exc.message),
                      status=409 if exc.code == "round_running" else 400)
    round_.refresh_from_db()  # without a broker (eager Celery) the round has already run
    if round_.finished:
        messages.success(request, f"Round {round_.number} {round_.get_status_display().lower()}.")
    else:
        messages.success(request, f"Round {round_.number} queued on the gpu queue.")
    return redirect(loop)


@require_POST
@role_required("curator")
def loop_settings(request, pk):
    loop = _loop(pk)
    values, errors = parse_loop_form(request.POST, SETTINGS)
    if not errors:
        try:
            services.loop_update(loop, **values)
        except LoopError as exc:
            errors[_error_field(exc)] = exc.message
    if errors:
        loop.refresh_from_db()
        context = loop_context(loop, settings_errors=errors,
                               settings_data={name: request.POST.get(name, "") for name in SETTINGS})
        return render(request, "modeling/loop_detail.html", context, status=400)
    messages.success(request, "Settings saved: the next round orders the queue with them.")
    return redirect(loop)


# --- From the campaign page --------------------------------------------------------------------------


LOOP_CARD = "modeling/_loop_card.html"


def campaign_card(campaign):
    """The card on a campaign's dashboard (``annotation.campaign_cards``, registered by ModelingConfig.ready()):
    (template, context), or None for kinds that train no model."""
    context = campaign_card_context(campaign)
    return (LOOP_CARD, context) if context else None


def campaign_card_context(campaign, data=None, errors=None) -> dict:
    """The "Learning loop" card of a campaign's dashboard: its loop, or the form to start one; nothing
    for kinds that train no model (unless a refused form has to say why)."""
    if campaign.kind not in services.LOOP_KINDS and not errors:
        return {}
    loop = LearningLoop.objects.filter(campaign=campaign).first()
    latest = loop.rounds.order_by("-number").first() if loop else None
    return {"loop_card": {"loop": loop, "latest": latest, "samplers": sampler_choices(), "help": field_help(),
                          "data": data if data is not None else form_defaults(), "errors": errors or {}}}


@require_POST
@role_required("curator")
def loop_create(request):
    from annotation.models import Campaign

    raw = (request.POST.get("campaign") or "").strip()
    campaign = Campaign.objects.filter(pk=int(raw)).first() if raw.isdigit() else None
    if campaign is None:
        raise Http404(f"No campaign {raw!r}.")
    values, errors = parse_loop_form(request.POST, CREATE)
    if not errors:
        try:
            loop = services.loop_create(campaign=campaign, user=request.user, **values)
        except LoopError as exc:
            errors[_error_field(exc)] = exc.message
    if errors:
        return _campaign_page(request, campaign, request.POST, errors)
    messages.success(request, f"Learning loop started for {campaign.name}: press Next round to train on "
                              f"its labels.")
    return redirect(loop)


def _campaign_page(request, campaign, data, errors):
    """The campaign dashboard again, with the refused form and its errors (400)."""
    from annotation.web.curator.views import DEFAULT_PRECISION, dashboard_context

    context = dashboard_context(campaign, DEFAULT_PRECISION) | campaign_card_context(campaign, data, errors)
    if LOOP_CARD not in context["campaign_cards"]:  # a kind that trains no model: the card says why
        context["campaign_cards"] = [*context["campaign_cards"], LOOP_CARD]
    context["precision_text"] = DEFAULT_PRECISION
    return render(request, "annotation/campaigns/detail.html", context, status=400)
