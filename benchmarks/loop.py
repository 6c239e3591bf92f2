"""The learning loop: does the default sampler need fewer labels than random, and how long is a round?

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python benchmarks/loop.py
        [--rounds 10] [--repeats 3] [--tasks 10000] [--with-uncertainty] [--skip-round]

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


def simulate(x, y, arm: str, rounds: int, seed: int):
    import numpy as np

    from modeling.engine import fit_in_memory
    from modeling.evaluation import binary_report
    from modeling.loop import samplers
    from modeling.trainers import get_trainer

    trainer = get_trainer("fluency-encoder")
    config = trainer.config({})
    pool, test = np.arange(POOL), np.arange(POOL, POOL + TEST)
    labelled = list(np.random.default_rng(seed).choice(pool, START, replace=False))
    curve = []
    for number in range(rounds + 1):
        prepared = trainer.prepared_from_features(x[labelled], y[labelled].tolist(), config)
        model = fit_in_memory(trainer, prepared, config)
        curve.append(binary_report(y[test].tolist(), trainer.predict_features(model, x[test]))["macro_f1"])
        if number == rounds:
            break
        rest = np.setdiff1d(pool, labelled)
        probs = np.asarray(trainer.predict_features(model, x[rest]))
        order = samplers.order(probs, arm, seed=seed * 1000 + number, batch_size=STEP, labels_so_far=len(labelled),
                               features=trainer.sampler_features(model, x[rest]))
        labelled += list(rest[order[:STEP]])
    return curve


def labels_needed(curve, target):
    """(labels at the first round reaching target, linearly interpolated labels) or (None, None)."""
    for n, value in enumerate(curve):
        if value >= target:
            labels = START + STEP * n
            if n == 0:
                return labels, float(labels)
            before = curve[n - 1]
            return labels, labels - STEP + STEP * (target - before) / max(value - before, 1e-9)
    return None, None


def sampler_part(args) -> dict:
    import numpy as np

    from modeling.threads import torch_threads
    from modeling.trainers import get_trainer
    from tests.modeling.fluency_corpus import labelled_pool

    rows = labelled_pool(POOL + TEST, fluent_share=0.6, seed=0)
    trainer = get_trainer("fluency-encoder")
    started = time.perf_counter()
    x = trainer.text_features([t for t, _ in rows])
    y = np.asarray([label for _, label in rows])
    print(f"pool: {POOL} to label + {TEST} test sentences, {int(y.mean() * 100)}% fluent; features "
          f"{x.shape[1]} per sentence in {time.perf_counter() - started:.1f} s")
    arms = ["hybrid", "random"] + (["uncertainty"] if args.with_uncertainty else [])
    curves = {arm: [] for arm in arms}
    with torch_threads(1):
        for seed in range(args.repeats):
            for arm in arms:
                tick = time.process_time()
                curves[arm].append(simulate(x, y, arm, args.rounds, seed))
                print(f"  repetition {seed + 1}/{args.repeats} {arm:<11} {time.process_time() - tick:5.1f} CPU s")
    means = {arm: np.mean(c, axis=0) for arm, c in curves.items()}
    sds = {arm: np.std(c, axis=0) for arm, c in curves.items()}
    print(f"\nmacro F1 on the {TEST} test sentences, mean ± sd over {args.repeats} repetitions")
    header = f"{'round':>5} {'labels':>6} " + " ".join(f"{arm:>15}" for arm in arms) + f" {'hybrid-random':>14}"
    print(header)
    for n in range(args.rounds + 1):
        cells = " ".join(f"{means[a][n]:>8.3f} ± {sds[a][n]:.3f}" for a in arms)
        print(f"{n:>5} {START + STEP * n:>6} {cells} {means['hybrid'][n] - means['random'][n]:>+14.3f}")
    final = float(means["random"][-1])
    at_round, interpolated = labels_needed(list(means["hybrid"]), final)
    total = START + STEP * args.rounds
    worst = float(np.min(means["hybrid"] - means["random"]))
    print(f"\nrandom's final macro F1 {final:.3f} at {total} labels")
    if at_round is None:
        print("the default sampler (hybrid) does not reach it within these rounds")
    else:
        print(f"the default sampler (hybrid) reaches it at {at_round} labels ({at_round / total:.0%} of random's; "
              f"interpolated between rounds {interpolated:.0f}, {interpolated / total:.0%}); target <= 60%")
    print(f"largest shortfall of hybrid below random at any round: {max(0.0, -worst):.3f} (target <= 0.02)")
    return {"final": final, "at_round": at_round, "interpolated": interpolated, "worst": worst}


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
    parser.add_argument("--rounds", type=int, default=10, help="rounds of +40 labels after the 40 start labels (>= 6)")
    parser.add_argument("--repeats", type=int, default=3, help="seeded repetitions of each arm")
    parser.add_argument("--tasks", type=int, default=10000, help="open tasks re-scored by a platform round")
    parser.add_argument("--with-uncertainty", action="store_true", help="also simulate pure uncertainty sampling")
    parser.add_argument("--skip-round", action="store_true", help="only the sampler simulation")
    add_scratch_arguments(parser, "loop")
    args = parser.parse_args()
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
