"""Make a learning loop, start a round, and keep rounds honest about dead workers.

A round is a LoopRound row and one Celery task (``modeling.loop_round``, queue ``gpu``) that runs it
(modeling.loop.rounds). At most one round per loop is queued or running: a partial unique constraint
refuses the second, so two curators pressing "Next round" together get one round and a clear refusal.
"""
from __future__ import annotations

from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from captionlab import tasks

from ..models import Kind, LearningLoop, LoopRound, Sampler
from ..trainers import LOOP_DEFAULT_TRAINERS, get_trainer
from ..trainers.base import TrainingError
from . import holdout

# Campaign kinds whose labels train a model, with the model kind and the default trainer. Informativeness
# and GOOD/BAD follow by adding a row here and a trainer that reads their aggregates.
LOOP_KINDS = {"fluency": (Kind.FLUENCY, LOOP_DEFAULT_TRAINERS["fluency"])}
STALE_SECONDS = 120  # a running round without a heartbeat for this long lost its worker
QUEUED_SECONDS = 3600  # a round no worker took for this long (the broker's visibility timeout) is given up


class LoopError(Exception):
    def __init__(self, message: str, code: str = "loop_error", field: str | None = None):
        super().__init__(message)
        self.message, self.code, self.field = message, code, field

    def __str__(self):
        return self.message


def loop_create(*, campaign, user=None, trainer: str | None = None, sampler: str = Sampler.HYBRID,
                holdout_source: str = "random", holdout_fraction: float = 0.2, auto_every_votes: int = 0,
                batch_size: int = 40, random_share: float = 0.3, min_holdout: int = 20, config=None,
                seed: int = 0) -> LearningLoop:
    if campaign.kind not in LOOP_KINDS:
        raise LoopError(f"A {campaign.kind!r} campaign trains no model; learning loops run on "
                        f"{', '.join(LOOP_KINDS)} campaigns.", code="bad_kind", field="campaign")
    if LearningLoop.objects.filter(campaign=campaign).exists():
        raise LoopError(f"Campaign {campaign} already has a learning loop.", code="duplicate", field="campaign")
    kind, default_trainer = LOOP_KINDS[campaign.kind]
    trainer = trainer or default_trainer
    try:
        if get_trainer(trainer).kind != kind:
            raise LoopError(f"Trainer {trainer!r} does not train a {kind} model.", field="trainer")
    except TrainingError as exc:
        raise LoopError(str(exc), field="trainer") from None
    _check_options(sampler, holdout_source, holdout_fraction, batch_size, random_share, auto_every_votes)
    chosen = holdout.choose(campaign, holdout_source, holdout_fraction, seed)
    if not chosen:
        what = "gold items with an expected answer" if holdout_source == "gold" else "real tasks"
        raise LoopError(f"The hold-out would be empty: the campaign has no {what}.", code="empty_holdout",
                        field="holdout_source")
    return LearningLoop.objects.create(
        campaign=campaign, kind=kind, trainer=trainer, config=dict(config or {}), sampler=sampler,
        random_share=random_share, batch_size=batch_size, holdout_source=holdout_source,
        holdout_fraction=holdout_fraction, holdout_tasks=chosen, min_holdout=min_holdout,
        auto_every_votes=auto_every_votes, seed=seed, created_by=user)


def _check_options(sampler, holdout_source, fraction, batch_size, random_share, auto_every):
    if sampler not in Sampler.values:
        raise LoopError(f"Unknown sampler {sampler!r}; use one of {', '.join(Sampler.values)}.", field="sampler")
    if holdout_source not in ("random", "gold"):
        raise LoopError("The hold-out is 'random' (a share of the tasks) or 'gold' (the gold items).",
                        field="holdout_source")
    if not 0.05 <= float(fraction) <= 0.5:
        raise LoopError("The hold-out share must be between 0.05 and 0.5.", field="holdout_fraction")
    if int(batch_size) < 1:
        raise LoopError("The batch size must be at least 1.", field="batch_size")
    if not 0.0 <= float(random_share) <= 1.0:
        raise LoopError("The sampler's share must be between 0 and 1.", field="random_share")
    if int(auto_every) < 0:
        raise LoopError("'Every N votes' is 0 (off) or more.", field="auto_every_votes")


def loop_update(loop: LearningLoop, **fields) -> LearningLoop:
    """Change the sampler, its random share, batch size or the automatic rounds."""
    allowed = {"sampler", "random_share", "batch_size", "auto_every_votes"}
    fields = {k: v for k, v in fields.items() if k in allowed and v is not None}
    merged = {k: fields.get(k, getattr(loop, k)) for k in allowed}
    _check_options(merged["sampler"], loop.holdout_source, loop.holdout_fraction, merged["batch_size"],
                   merged["random_share"], merged["auto_every_votes"])
    for key, value in fields.items():
        setattr(loop, key, value)
    loop.save(update_fields=list(fields) or None)
    return loop


def round_start(loop: LearningLoop, *, user=None, trigger: str = "manual", enqueue: bool = True) -> LoopRound:
    """A queued round, sent to the gpu queue after commit; LoopError "round_running" when one is open."""
    sweep_stale(loop)
    try:
        with transaction.atomic():
            number = (loop.rounds.order_by("-number").values_list("number", flat=True).first() or 0) + 1
            round_ = LoopRound.objects.create(loop=loop, number=number, sampler=loop.sampler, trigger=trigger,
                                              created_by=user)
    except IntegrityError:
        open_round = loop.rounds.filter(status__in=["queued", "running"]).first()
        raise LoopError(f"Round {open_round.number if open_round else '?'} is still "
                        f"{open_round.status if open_round else 'open'}: wait for it to end.",
                        code="round_running") from None
    from annotation.models import Vote

    LearningLoop.objects.filter(pk=loop.pk).update(
        votes_at_last_round=Vote.objects.filter(campaign=loop.campaign).count())
    if enqueue:
        transaction.on_commit(lambda: _send(round_.pk))
    return round_


def _send(round_id: int) -> None:
    """Queue the round's task (``modeling.loop_round``); a broker that cannot take it fails the round (nothing
    waits forever)."""
    try:
        tasks.enqueue("modeling.loop_round", round_id)
    except Exception as exc:  # noqa: BLE001 - kombu/redis errors vary; the curator sees the message
        LoopRound.objects.filter(pk=round_id, status=LoopRound.Status.QUEUED).update(
            status=LoopRound.Status.FAILED, finished_at=timezone.now(), stage="lost",
            error=f"The round could not be queued ({type(exc).__name__}: {str(exc)[:200]}); is the broker up?")


def maybe_auto_round(campaign_id: int) -> LoopRound | None:
    """Start a round when the campaign's loop runs every N votes and N new votes have come in."""
    from annotation.models import Vote

    loop = LearningLoop.objects.filter(campaign_id=campaign_id, auto_every_votes__gt=0).first()
    if loop is None:
        return None
    if Vote.objects.filter(campaign_id=campaign_id).count() - loop.votes_at_last_round < loop.auto_every_votes:
        return None
    try:
        return round_start(loop, trigger="auto")
    except LoopError:
        return None


def is_stale(round_: LoopRound, now=None) -> bool:
    if round_.status != LoopRound.Status.RUNNING:
        return False
    beat = round_.heartbeat_at or round_.started_at or round_.created_at
    return ((now or timezone.now()) - beat).total_seconds() > STALE_SECONDS


def sweep_stale(loop: LearningLoop | None = None) -> int:
    """Mark running rounds whose worker stopped beating as failed (the campaign's priorities stay as the
    last finished round left them). Beat runs this every minute; pages and round_start run it too."""
    rounds = LoopRound.objects.filter(status=LoopRound.Status.RUNNING)
    if loop is not None:
        rounds = rounds.filter(loop=loop)
    failed = 0
    now = timezone.now()
    for round_ in rounds:
        if is_stale(round_, now):
            failed += LoopRound.objects.filter(pk=round_.pk, status=LoopRound.Status.RUNNING).update(
                status=LoopRound.Status.FAILED, finished_at=now, stage="lost",
                error=f"The worker stopped during '{round_.stage or 'start'}' (no heartbeat for {STALE_SECONDS} s). "
                      f"The tasks keep their previous priorities; start the next round again.")
    never_started = LoopRound.objects.filter(status=LoopRound.Status.QUEUED,
                                             created_at__lt=now - timedelta(seconds=QUEUED_SECONDS))
    if loop is not None:
        never_started = never_started.filter(loop=loop)
    failed += never_started.update(
        status=LoopRound.Status.FAILED, finished_at=now, stage="lost",
        error=f"No worker took the round within {QUEUED_SECONDS // 60} minutes (is a worker consuming the gpu "
              f"queue?). The tasks keep their previous priorities; start the next round again.")
    return failed
