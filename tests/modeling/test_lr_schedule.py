"""The learning-rate schedule: warm-up then cosine, the seed's step decay, the lr in the history, a
resumed run that continues the same curve; and the loss points of a generator's first epoch spread
over the epoch instead of stacked at its end (the vertical line on the chart)."""
import math

import pytest

from modeling import engine
from modeling.engine import schedule
from modeling.trainers import register
from modeling.trainers.base import TrainingError

from .conftest import TinyTrainer, WorkerKilled

pytestmark = pytest.mark.django_db


class GeneratorTiny(TinyTrainer):
    """The tiny trainer with generator batches, like the captioners: no length before the epoch runs."""

    name = "test-tiny-generator"
    default_config = {**TinyTrainer.default_config, "n": 640, "batch_size": 8}

    def batches(self, split, config, epoch, generator, train):
        yield from super().batches(split, config, epoch, generator, train)


GENERATOR = GeneratorTiny()
register(GENERATOR)


def _plan(**config):
    return schedule.settings({"epochs": 10, **config})


def test_cosine_warms_up_linearly_then_falls_to_the_floor():
    plan = _plan(lr_schedule="cosine", warmup_steps=4, min_lr_ratio=0.1)
    warm = [schedule.factor(plan, step, step / 100, 0) for step in range(4)]
    assert warm == [0.25, 0.5, 0.75, 1.0]
    assert schedule.factor(plan, 4, 0.04, 0) == pytest.approx(1.0, abs=1e-3)
    middle = schedule.factor(plan, 500, 0.04 + (10 - 0.04) / 2, 5)
    assert middle == pytest.approx(0.1 + 0.9 * 0.5, abs=1e-6)
    assert schedule.factor(plan, 999, 10.0, 9) == pytest.approx(0.1)


def test_warmup_fraction_is_a_share_of_the_training():
    plan = _plan(lr_schedule="cosine", warmup_fraction=0.1)  # one epoch of ten
    assert schedule.factor(plan, 10, 0.5, 0) == pytest.approx(0.5)
    assert schedule.factor(plan, 20, 1.0, 1) == pytest.approx(1.0)
    assert plan["warmup_end"] == 1.0


def test_step_decay_is_the_seeds_every_n_epochs():
    plan = _plan(lr_schedule="step", lr_decay=0.5, lr_decay_every=3)
    assert [schedule.factor(plan, 0, e, e) for e in (0, 2, 3, 5, 6, 9)] == [1, 1, 0.5, 0.5, 0.25, 0.125]


@pytest.mark.parametrize("bad", [{"lr_schedule": "linear"}, {"warmup_fraction": 1.5}, {"min_lr_ratio": 2},
                                 {"lr_decay": 0}, {"lr_decay_every": 0}, {"warmup_steps": "many"}])
def test_bad_schedule_settings_are_refused_before_a_run_exists(tiny, bad):
    with pytest.raises(TrainingError) as err:
        engine.create_run("test-tiny", {"device": "cpu", **bad})
    assert err.value.code == "bad_config"


def test_the_history_records_the_lr_and_a_constant_run_keeps_it(tiny):
    run = engine.train(engine.create_run("test-tiny", {"device": "cpu", "lr": 0.02}).pk)
    assert run.status == "done", run.error
    assert {h["lr"] for h in run.history} == {0.02}


def test_a_cosine_run_falls_from_the_peak_to_the_floor(tiny):
    config = {"device": "cpu", "lr": 0.02, "epochs": 4, "lr_schedule": "cosine", "warmup_steps": 3,
              "min_lr_ratio": 0.05}
    run = engine.train(engine.create_run("test-tiny", config).pk)
    assert run.status == "done", run.error
    ends = [h["lr"] for h in run.history if h.get("end")]
    assert ends == sorted(ends, reverse=True) and ends[-1] == pytest.approx(0.02 * 0.05, rel=0.2)
    firsts = [h for h in run.history if not h.get("end")][:3]
    assert [h["lr"] for h in firsts] == pytest.approx([0.02 / 3, 0.04 / 3, 0.02])


def test_a_resumed_run_continues_the_same_schedule(tiny):
    config = {"device": "cpu", "seed": 3, "epochs": 3, "lr_schedule": "cosine", "warmup_fraction": 0.2}
    reference = engine.train(engine.create_run("test-tiny", config).pk)
    tiny.reset()
    run = engine.create_run("test-tiny", config)
    tiny.kill_after_epoch = 0
    with pytest.raises(WorkerKilled):
        engine.train(run.pk)
    run = engine.train(run.pk)
    assert run.status == "done", run.error
    assert "Resumed from" in run.log
    assert [h["lr"] for h in run.history] == [h["lr"] for h in reference.history]
    assert [h["loss"] for h in run.history] == [h["loss"] for h in reference.history]


def test_a_generators_first_epoch_is_spread_over_the_epoch(tiny):
    run = engine.train(engine.create_run("test-tiny-generator", {"device": "cpu", "epochs": 2,
                                                                 "lr_schedule": "cosine"}).pk)
    assert run.status == "done", run.error
    first = [h["epoch"] for h in run.history if not h.get("end") and h["epoch"] <= 1]
    assert len(first) >= engine.POINTS_PER_EPOCH - 1 and len(set(first)) == len(first)
    assert min(first) < 0.1 and max(first) == 1.0
    assert run.steps_per_epoch == math.ceil(480 / 8)


def test_the_dry_count_leaves_the_first_epoch_as_it_was(tiny):
    """Counting a generator's batches must not change what the epoch draws: same losses as a list."""
    gen = engine.train(engine.create_run("test-tiny-generator", {"device": "cpu", "epochs": 1}).pk)
    listed = engine.train(engine.create_run("test-tiny", {"device": "cpu", "epochs": 1, "n": 640,
                                                          "batch_size": 8}).pk)
    assert [h["loss"] for h in gen.history if h.get("end")] == [h["loss"] for h in listed.history if h.get("end")]
