"""The learning loop: does the default sampler need fewer labels than random, and how long is a round?

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python benchmarks/loop.py
        [--rounds 10] [--repeats 3] [--tasks 10000] [--with-uncertainty] [--skip-round] [--trainer NAME]
    ... benchmarks/loop.py --pool tests/modeling/data/fluency_dev.tsv [--repeats 5] [--start 20] [--step 20]

With ``--pool PATH`` the simulation (2.) runs on a labelled pool file instead of the template pool: the format
of tests/modeling/data/fluency_dev.tsv (modeling/loop/pool_file.py; a file in another format, or with one
class, is a clear error and exit code 2). Each repetition splits it, stratified and seeded, into the pool to
label and ``--test-share`` test items; the default sampler, uncertainty and random run from the same start
labels; printed per round: mean ± sd macro F1 of each, the default's difference with random and its seconds
per round; the verdict's baselines on the same test items; the labels the default needs to reach random's
final F1. ``--trainer`` (default: a new loop's fluency trainer, modeling.trainers.LOOP_DEFAULT_TRAINERS)
picks the trainer simulated.

1. The pool: 2,600 caption sentences from tests/modeling/fluency_corpus.py (written captions, then
   captions composed from who / doing what / where / when parts), 40% of them given one or two
   machine-translation-like errors (adjacent words swapped, function words dropped, a token repeated, a
   verb in the wrong form), never a sentence beside its own corrupted twin. 2,000 are the pool to label,
   600 the test set.
2. Simulation: 40 seeded random start labels, +40 per round, ``--rounds`` rounds, ``--repeats`` seeded
   repetitions. Each round retrains the platform's trainer ("fluency-encoder": the packaged sentence
   encoder's vectors and part-of-speech bigram counts, the same features a round computes; the same
   engine loop, ``fit_in_memory``) and lets the sampler pick the next 40 from the rest of the pool:
   the platform's default sampler (hybrid) against random, both from the same start labels. Printed per
   round: macro F1 on the test set, mean and sd over the repetitions, both arms and their difference;
   then the labels the default sampler needs to reach random's final F1 (at round granularity and
   interpolated between rounds) as a share of random's.
3. A round on the platform's own path: a fluency campaign of ``--tasks`` open tasks plus 400 labelled
   (two votes each) in a scratch PostgreSQL database, a learning loop on it, and ``run_round`` as the
   Celery task runs it (aggregate, train with 5-fold cross-validation, compare on the hold-out, random arm,
   re-score every open task, re-prioritise). Twice: the first round encodes every text (cold cache), the
   second after 40 more labels finds them in the TextEmbedding cache. Printed: wall seconds, this
   process's CPU seconds and its PostgreSQL backend's, CPU per re-scored task; baseline: the same encoder
   (SentenceTransformer.encode) over the same texts in this process.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from scratch_db import add_scratch_arguments, postgres_base_url, scratch_database  # noqa: E402

POOL, TEST, START, STEP = 2000, 600, 40, 40
ARMS = ("uncertainty", "random")  # beside the default sampler


class Learner:
    """The platform's trainer as the simulation uses it: fit on some of the pool's items, score others.

    A trainer that builds features once (``text_features``, ``prepared_from_features``, ``predict_features``:
    the encoder head) is simulated on cached features, as a loop round computes them; one that prepares
    labelled items itself (``prepared_from_items`` and ``score_texts``) is refitted from the texts each
    round; any other cannot be simulated and the benchmark says so (exit code 2)."""

    def __init__(self, name: str, texts: list[str]):
        from modeling.trainers import get_trainer

        self.name, self.trainer, self.texts = name, get_trainer(name), list(texts)
        self.config = self.trainer.config({})
        t = self.trainer
        if all(hasattr(t, a) for a in ("text_features", "prepared_from_features", "predict_features")):
            self.mode, self.x = "features", t.text_features(self.texts)
        elif all(hasattr(t, a) for a in ("prepared_from_items", "score_texts")):
            self.mode, self.x = "items", None
        else:
            raise SystemExit(f"error: trainer {name!r} cannot be simulated: it has neither text_features/"
                             f"prepared_from_features/predict_features nor prepared_from_items/score_texts.")

    def fit(self, idx, y):
        from modeling.engine import fit_in_memory

        idx = [int(i) for i in idx]
        if self.mode == "features":
            prepared = self.trainer.prepared_from_features(self.x[idx], [int(y[i]) for i in idx], self.config)
        else:
            items = [{"task": i, "caption": i, "text": self.texts[i], "source": "", "label": int(y[i]),
                      "language": "en", "source_language": "en"} for i in idx]
            prepared = self.trainer.prepared_from_items(items, (items, [], []), {}, self.config)
        return fit_in_memory(self.trainer, prepared, self.config), prepared.info

    def probs(self, fitted, idx):
        import numpy as np

        model, info = fitted
        idx = [int(i) for i in idx]
        if self.mode == "features":
            return np.asarray(self.trainer.predict_features(model, self.x[idx]))
        return np.asarray(self.trainer.score_texts(model, info, [self.texts[i] for i in idx]))

    def sampler_features(self, fitted, idx):
        if self.mode != "features" or not hasattr(self.trainer, "sampler_features"):
            return None
        return self.trainer.sampler_features(fitted[0], self.x[[int(i) for i in idx]])


def simulate(learner: Learner, y, pool, test, arm: str, rounds: int, seed: int, start: int, step: int,
             random_share: float = 0.3):
    """[(labels, macro F1 on ``test``, seconds for the round)] for ``arm`` from ``start`` seeded random labels."""
    import numpy as np

    from modeling.evaluation import binary_report
    from modeling.loop import samplers

    labelled = list(np.random.default_rng(seed).choice(pool, start, replace=False))
    curve = []
    for number in range(rounds + 1):
        tick = time.perf_counter()
        fitted = learner.fit(labelled, y)
        f1 = binary_report(y[test].tolist(), learner.probs(fitted, test).tolist())["macro_f1"]
        rest = np.setdiff1d(pool, labelled)
        if number < rounds and len(rest):
            probs = learner.probs(fitted, rest)
            order = samplers.order(probs, arm, seed=seed * 1000 + number, batch_size=step, random_share=random_share,
                                   labels_so_far=len(labelled), features=learner.sampler_features(fitted, rest))
            labelled += list(rest[order[:step]])
        curve.append((start + step * number, f1, time.perf_counter() - tick))
    return curve


def labels_needed(curve, target, start=START, step=STEP):
    """(labels at the first round reaching target, linearly interpolated labels) or (None, None)."""
    for n, value in enumerate(curve):
        if value >= target:
            labels = start + step * n
            if n == 0:
                return labels, float(labels)
            before = curve[n - 1]
            return labels, labels - step + step * (target - before) / max(value - before, 1e-9)
    return None, None


def stratified_split(y, test_share: float, seed: int):
    """(pool indices, test indices): each class split on its own, seeded."""
    import numpy as np

    rng = np.random.default_rng(seed)
    pool, test = [], []
    for label in (0, 1):
        members = rng.permutation(np.flatnonzero(y == label))
        cut = max(1, round(len(members) * test_share))
        test += members[:cut].tolist()
        pool += members[cut:].tolist()
    return np.asarray(sorted(pool)), np.asarray(sorted(test))


def baselines_on_test(texts, y, pool, test) -> dict:
    """The verdict's baselines on the test items, fitted on the whole label pool (the most they can get)."""
    from modeling import verdicts

    rules = verdicts.baseline_predictions([texts[i] for i in pool], y[pool].tolist(), [texts[i] for i in test])
    out = {name: verdicts.macro_f1(y[test], rule["pred"]) for name, rule in rules.items()}
    out["chance"] = verdicts.CHANCE_MACRO_F1
    return out


def sampler_part(args) -> dict:
    import numpy as np

    from modeling.loop import samplers
    from modeling.threads import torch_threads
    from modeling.trainers import LOOP_DEFAULT_TRAINERS

    trainer = args.trainer or LOOP_DEFAULT_TRAINERS["fluency"]
    default = samplers.DEFAULT
    if args.pool:
        from modeling.loop.pool_file import read_pool

        rows = read_pool(args.pool)  # PoolFileError: main() prints it and exits 2
        texts, y = [r["text"] for r in rows], np.asarray([r["label"] for r in rows])
        where = f"{args.pool}: {len(rows)} rows"
    else:
        from tests.modeling.fluency_corpus import labelled_pool

        built = labelled_pool(POOL + TEST, fluent_share=0.6, seed=0)
        texts, y = [t for t, _ in built], np.asarray([label for _, label in built])
        where = "the built-in template pool (tests/modeling/fluency_corpus.py)"
    start, step = args.start, args.step
    started = time.perf_counter()
    learner = Learner(trainer, texts)
    print(f"pool: {where}, {int(round(y.mean() * 100))}% fluent; trainer {trainer} ({learner.mode} path, "
          f"{time.perf_counter() - started:.1f} s to prepare); default sampler {default}")
    arms = [default] + [a for a in ARMS if a != default and (a != "uncertainty" or args.with_uncertainty or args.pool)]
    curves = {arm: [] for arm in arms}
    baselines = []
    with torch_threads(1):
        for seed in range(args.repeats):
            if args.pool:
                pool, test = stratified_split(y, args.test_share, seed)
            else:
                pool, test = np.arange(POOL), np.arange(POOL, POOL + TEST)
            rounds = min(args.rounds, max(0, (len(pool) - start) // step))
            baselines.append(baselines_on_test(texts, y, pool, test))
            for arm in arms:
                curves[arm].append(simulate(learner, y, pool, test, arm, rounds, seed, start, step, args.random_share))
                print(f"  repetition {seed + 1}/{args.repeats} {arm:<11} {sum(c[2] for c in curves[arm][-1]):6.1f} s "
                      f"({len(pool)} to label, {len(test)} test)")
    n_rounds = min(len(c) for cs in curves.values() for c in cs)
    f1 = {arm: np.asarray([[p[1] for p in c[:n_rounds]] for c in cs]) for arm, cs in curves.items()}
    secs = {arm: np.asarray([[p[2] for p in c[:n_rounds]] for c in cs]) for arm, cs in curves.items()}
    means, sds = {a: v.mean(axis=0) for a, v in f1.items()}, {a: v.std(axis=0) for a, v in f1.items()}
    print(f"\nmacro F1 on the test items, mean ± sd over {args.repeats} repetitions; s/round: the default's mean "
          f"seconds for one round (fit, score, order)")
    header = f"{'round':>5} {'labels':>6} " + " ".join(f"{arm:>15}" for arm in arms) + \
        f" {default + '-random (se)':>21} {'s/round':>8}"
    print(header)
    paired = f1[default] - f1["random"]  # the same start labels and test items per repetition
    se = paired.std(axis=0, ddof=1) / np.sqrt(len(paired)) if len(paired) > 1 else np.zeros(n_rounds)
    for n in range(n_rounds):
        cells = " ".join(f"{means[a][n]:>8.3f} ± {sds[a][n]:.3f}" for a in arms)
        print(f"{n:>5} {start + step * n:>6} {cells} {paired[:, n].mean():>+13.3f} ({se[n]:.3f}) "
              f"{secs[default][:, n].mean():>8.2f}")
    mean_base = {k: float(np.mean([b[k] for b in baselines])) for k in baselines[0]}
    print("baselines on the same test items (fitted on the whole label pool): " +
          ", ".join(f"{k} {v:.3f}" for k, v in mean_base.items()))
    final = float(means["random"][-1])
    total = start + step * (n_rounds - 1)
    at_round, interpolated = labels_needed(list(means[default]), final, start, step)
    worst = float(np.min(means[default] - means["random"]))
    below = int(np.sum(means[default] - means["random"] < -0.02))
    print(f"\nrandom's final macro F1 {final:.3f} at {total} labels")
    if at_round is None:
        print(f"the default sampler ({default}) does not reach it within these rounds")
    else:
        print(f"the default sampler ({default}) reaches it at {at_round} labels ({at_round / total:.0%} of random's; "
              f"interpolated between rounds {interpolated:.0f}, {interpolated / total:.0%})")
    print(f"largest shortfall of {default} below random at any round: {max(0.0, -worst):.3f}; rounds more than 0.02 "
          f"below: {below} of {n_rounds} (target: none)")
    print(f"best baseline on the test items: {max(mean_base.values()):.3f}; the default at {total} labels: "
          f"{means[default][-1]:.3f} ({means[default][-1] - max(mean_base.values()):+.3f})")
    return {"final": final, "at_round": at_round, "interpolated": interpolated, "worst": worst, "below": below}


def _backend_cpu() -> float | None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def round_part(args) -> None:
    from django.contrib.auth import get_user_model

    from annotation import services
    from annotation.models import Task
    from curation.models import Caption, Collection, Image
    from modeling import encoders
    from modeling.loop import services as loops
    from modeling.loop.rounds import run_round
    from tests.modeling.fluency_corpus import labelled_pool
    from tests.modeling.loop_helpers import next_tasks, vote

    n = args.tasks + 400
    rows = labelled_pool(n, fluent_share=0.6, seed=1)
    collection = Collection.objects.create(name="bench loop", source_kind=Collection.SourceKind.WEB_ALT_TEXT)
    images = Image.objects.bulk_create([Image(collection=collection, sha256=f"{k + 1:064x}", width=640, height=480,
                                              format="JPEG", external_id=f"b{k}", status=Image.Status.READY)
                                        for k in range(n)], batch_size=2000)
    Caption.objects.bulk_create([Caption(image=img, text=text, origin=Caption.Origin.ALT_TEXT, language="en")
                                 for img, (text, _) in zip(images, rows)], batch_size=2000)
    truth_by_text = {text: label for text, label in rows}
    User = get_user_model()
    curator = User.objects.create_user("bench-curator", password="x")
    raters = [User.objects.create_user(f"bench-rater{i}", password="x") for i in range(2)]
    campaign = services.campaign_create(name="bench loop", kind="fluency", selection={"collection": collection.pk},
                                        user=curator, members=raters, status="running", votes_per_item=2)
    truth = {pk: truth_by_text[text] for pk, text in
             Task.objects.filter(campaign=campaign).values_list("pk", "caption__text")}
    loop = loops.loop_create(campaign=campaign, user=curator)
    vote(campaign, truth, next_tasks(campaign, 400), raters)
    print(f"\ncampaign: {Task.objects.filter(campaign=campaign, status='open').count()} open tasks, 400 labelled "
          f"({len(loop.holdout_tasks)} tasks in the hold-out, spread through the queue)")
    texts = list(Task.objects.filter(campaign=campaign).values_list("caption__text", flat=True))
    model, _ = encoders.load()
    tick, wall = time.process_time(), time.perf_counter()
    model.encode(texts, batch_size=64, show_progress_bar=False)
    raw_cpu, raw_wall = time.process_time() - tick, time.perf_counter() - wall
    print(f"baseline: SentenceTransformer.encode of the same {len(texts)} texts: {raw_wall:.1f} s wall, "
          f"{raw_cpu:.1f} CPU s ({raw_cpu / len(texts) * 1000:.2f} CPU ms per text)")
    for label in ("cold cache", "warm cache"):
        round_ = loops.round_start(loop, user=curator, enqueue=False)
        backend, tick, wall = _backend_cpu(), time.process_time(), time.perf_counter()
        round_ = run_round(round_.pk)
        seconds, cpu = time.perf_counter() - wall, time.process_time() - tick
        backend_after = _backend_cpu()
        pg = f", PostgreSQL backend {backend_after - backend:.1f} CPU s" if backend is not None and backend_after else ""
        rescored = (round_.changes or {}).get("rescored", 0)
        print(f"round {round_.number} ({label}): {round_.status} in {seconds:.1f} s wall, {cpu:.1f} CPU s here{pg}; "
              f"{rescored} tasks re-scored, {cpu / max(rescored, 1) * 1000:.2f} CPU ms per task; "
              f"ratio to the raw encode {seconds / raw_wall:.2f}; target < 60 s. {round_.decision or round_.error}")
        vote(campaign, truth, next_tasks(campaign, 40), raters)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="rounds of --step labels after the --start labels "
                                                                 "(fewer when the pool runs out)")
    parser.add_argument("--pool", type=Path, help="a labelled pool file in the format of "
                        "tests/modeling/data/fluency_dev.tsv (label, error, source, text; tab-separated); each "
                        "repetition splits it (stratified, seeded) into the pool to label and --test-share test items; "
                        "the simulation only (no platform round)")
    parser.add_argument("--trainer", help="the trainer to simulate (default: the platform's default fluency trainer)")
    parser.add_argument("--start", type=int, help=f"seeded random start labels (default {START}; 20 with --pool)")
    parser.add_argument("--step", type=int, help=f"labels per round (default {STEP}; 20 with --pool)")
    parser.add_argument("--test-share", type=float, default=0.3, help="with --pool: the share kept as test items")
    parser.add_argument("--random-share", type=float, default=None,
                        help="the hybrid sampler's random share (default: the loop's default)")
    parser.add_argument("--cold-start-labels", type=int, default=None,
                        help="below this many labels the hybrid's first batch is all representative "
                             "(default: modeling.loop.samplers.COLD_START_LABELS)")
    parser.add_argument("--cold-start", choices=["representative", "random", "mixed"],
                        help="what the hybrid's cold-start batch picks (default: modeling.loop.samplers.COLD_START)")
    parser.add_argument("--repeats", type=int, default=3, help="seeded repetitions of each arm")
    parser.add_argument("--tasks", type=int, default=10000, help="open tasks re-scored by a platform round")
    parser.add_argument("--with-uncertainty", action="store_true", help="also simulate pure uncertainty sampling")
    parser.add_argument("--skip-round", action="store_true", help="only the sampler simulation")
    add_scratch_arguments(parser, "loop")
    args = parser.parse_args()
    args.start = args.start or (20 if args.pool else START)
    args.step = args.step or (20 if args.pool else STEP)
    if args.cold_start_labels is not None or args.cold_start:
        from modeling.loop import samplers

        samplers.COLD_START_LABELS = samplers.COLD_START_LABELS if args.cold_start_labels is None else \
            args.cold_start_labels
        samplers.COLD_START = args.cold_start or samplers.COLD_START
    if args.random_share is None:
        from modeling.loop.samplers import DEFAULT_RANDOM_SHARE

        args.random_share = DEFAULT_RANDOM_SHARE
    if args.pool:
        args.skip_round = True
        from modeling.loop.pool_file import PoolFileError, read_pool

        try:
            read_pool(args.pool)  # before any database work: a bad file is a clear error, exit code 2
        except PoolFileError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if not 0.05 <= args.test_share <= 0.6:
            print("error: --test-share must be between 0.05 and 0.6", file=sys.stderr)
            return 2
    base = postgres_base_url()
    if base is None:
        return 2
    with scratch_database(base, args.db_name, keep=args.keep_db) as db:
        os.environ.update({"DATABASE_URL": db.url, "LOG_LEVEL": "WARNING"})
        os.environ.pop("REDIS_URL", None)
        import django

        django.setup()
        try:
            sampler_part(args)
            if not args.skip_round:
                round_part(args)
        finally:
            from django.db import connections

            connections.close_all()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
