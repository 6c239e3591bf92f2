"""Fluency classifiers on a labelled development set: "fluency-finetune", "fluency-detector" and "fluency-encoder"
against the trivial baselines, at a given number of labels, over several seeded splits.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/wt_fluency .venv/bin/python benchmarks/fluency_dev.py \\
        [--data tests/modeling/data/fluency_dev.tsv] [--labels 200] [--seeds 5] \\
        [--extra-corpus tests/modeling/data/fluent_captions_dev.txt] [--set pretrain_steps=200 ...] [--no-encoder] \\
        [--no-finetune] [--finetune-set epochs=7 ...] [--test-data tests/modeling/data/fluency_second.tsv]

The file: tab-separated ``label error source text`` rows (label 1 fluent, 0 not), ``#`` comment lines and a
header. Per seed, a stratified random ``--labels`` items train and the rest are unseen test items. The
detector's pre-training corpus is every text of the file without its label (what a platform has: the
unlabelled pool), plus ``--extra-corpus`` lines when given; its cost is paid once per corpus (then cached,
like a loop's rounds) and printed apart from the per-fit seconds of the head. Printed per seed and as
mean ± sd: macro F1 on the unseen items of the fine-tuned encoder (its seconds per fit include
the fine-tuning), the detector, the encoder model, the majority class of the
training labels, chance (0.5: a fair coin's expected macro F1 on balanced data is about that), seed 004's
length rule, and the margin of the detector over the best trivial baseline.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


def read_pool(path: Path) -> list[dict]:
    """[{task, text, label, error, source, language}] from a dev-set file; ValueError naming the first bad line."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if cells[0] == "label":
            continue
        if len(cells) != 4 or cells[0] not in ("0", "1"):
            raise ValueError(f"{path}:{number}: want 'label<TAB>error<TAB>source<TAB>text' with label 0 or 1")
        rows.append({"task": len(rows), "label": int(cells[0]), "error": cells[1], "source": "", "origin": cells[2],
                     "text": cells[3].strip(), "language": "en", "source_language": "en"})
    labels = {r["label"] for r in rows}
    if labels != {0, 1}:
        raise ValueError(f"{path}: a development set needs both classes; found {sorted(labels) or 'none'}")
    return rows


def stratified(rows: list[dict], n: int, seed: int) -> tuple[list[int], list[int]]:
    rng = random.Random(f"fluency-dev:{seed}")
    share = n / len(rows)
    train = []
    for label in (0, 1):
        group = [r["task"] for r in rows if r["label"] == label]
        rng.shuffle(group)
        train += group[:round(len(group) * share)]
    train = sorted(train)
    held = set(train)
    return train, [r["task"] for r in rows if r["task"] not in held]


def fit_and_score(trainer, x, y, train, test, config) -> tuple[float, float, list[float]]:
    from modeling.engine import fit_in_memory
    from modeling.evaluation import binary_report

    started = time.perf_counter()
    prepared = trainer.prepared_from_features(x[train], [y[i] for i in train], config)
    model = fit_in_memory(trainer, prepared, config)
    seconds = time.perf_counter() - started
    probs = trainer.predict_features(model, x[test])
    return binary_report([y[i] for i in test], probs)["macro_f1"], seconds, probs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(ROOT / "tests/modeling/data/fluency_dev.tsv"))
    parser.add_argument("--test-data", default="", help="score on every item of this file instead of the rest of --data")
    parser.add_argument("--labels", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--extra-corpus", default="")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=JSON")
    parser.add_argument("--no-encoder", action="store_true", help="skip the fluency-encoder comparison")
    parser.add_argument("--no-finetune", action="store_true", help="skip fluency-finetune (tens of seconds per fit)")
    parser.add_argument("--finetune-set", action="append", default=[], metavar="KEY=JSON",
                        help="a fluency-finetune config override")
    parser.add_argument("--per-class", action="store_true", help="recall of 'not fluent' per error class")
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)

    import django

    django.setup()
    import numpy as np

    from modeling.evaluation import binary_report, majority_baseline
    from modeling.trainers import get_trainer
    from modeling.trainers.fluency_baselines import length_baseline
    from modeling.trainers.fluency_data import n_words

    rows = read_pool(Path(args.data))
    dev_rows = rows
    if args.test_data:
        # Train on --labels items of --data, score on every item of --test-data (a set in another voice);
        # the detector's corpus holds both files' texts without their labels, as a platform's pool would.
        held = read_pool(Path(args.test_data))
        rows = dev_rows + [{**r, "task": len(dev_rows) + r["task"]} for r in held]
        print(f"training on {args.data}, testing on all {len(held)} items of {args.test_data}")
    y = [r["label"] for r in rows]
    overrides = {}
    for item in args.set:
        key, _, raw = item.partition("=")
        overrides[key] = json.loads(raw)
    detector = get_trainer("fluency-detector")
    config = detector.config({"device": "cpu", **overrides})
    corpus = [r["text"] for r in rows]
    if args.extra_corpus:
        corpus += [line.strip() for line in Path(args.extra_corpus).read_text(encoding="utf-8").splitlines()
                   if line.strip() and not line.startswith("#")]
    print(f"{len(rows)} items ({sum(y)} fluent), {args.labels} labels per split, {args.seeds} seeds; corpus "
          f"{len(corpus)} texts; detector settings {json.dumps({k: config[k] for k in sorted(overrides)})}")

    started = time.perf_counter()
    everything = detector.prepared_with_corpus(rows, (rows, [], []), {}, config, corpus, {"file": len(corpus)},
                                               echo=print)
    pretrain_s = time.perf_counter() - started
    if everything.info.get("fallback"):
        print(everything.info["fallback"])
    x = everything.train["x"].numpy()
    print(f"detector features for {len(rows)} items: {pretrain_s:.1f} s (pre-training "
          f"{everything.summary.get('corpus', {}).get('pretraining', {}).get('seconds')} s, cached afterwards)")

    encoder = get_trainer("fluency-encoder")
    enc_config = encoder.config({"device": "cpu"})
    xe = None if args.no_encoder else encoder.text_features([r["text"] for r in rows], syntax=True)
    finetune = get_trainer("fluency-finetune")
    ft_config = finetune.config({"device": "cpu", **{k: json.loads(v) for k, _, v in
                                                      (item.partition("=") for item in args.finetune_set)}})
    xf = None if args.no_finetune else finetune.features_like({}, [r["text"] for r in rows])
    if xf is not None:
        print(f"fluency-finetune settings: epochs {ft_config['epochs']}, lr {ft_config['lr']} / head "
              f"{ft_config['head_lr']}, batch {ft_config['batch_size']}, torch threads "
              f"{ft_config['torch_threads'] or 'as set'}")

    table = []
    misses: dict[str, list[int]] = {}
    for seed in range(args.seeds):
        train, test = stratified(dev_rows, args.labels, seed)
        if args.test_data:
            test = list(range(len(dev_rows), len(rows)))
        yt = [y[i] for i in test]
        det_f1, det_s, probs = fit_and_score(detector, x, y, train, test, {**config, "seed": seed})
        enc_f1, enc_s = (fit_and_score(encoder, xe, y, train, test, {**enc_config, "seed": seed})[:2]
                         if xe is not None else (float("nan"), float("nan")))
        ft_f1, ft_s = (fit_and_score(finetune, xf, y, train, test, {**ft_config, "seed": seed})[:2]
                       if xf is not None else (float("nan"), float("nan")))
        majority = majority_baseline([y[i] for i in train], yt)["macro_f1"]
        length = length_baseline([n_words(rows[i]["text"]) for i in train], [y[i] for i in train],
                                 [n_words(rows[i]["text"]) for i in test], yt)
        length_f1 = binary_report(yt, [float(p) for p in
                                       [1.0 if n_words(rows[i]["text"]) < length["threshold"] else 0.0
                                        for i in test]])["macro_f1"]
        best = max(majority, 0.5, length_f1)
        table.append({"seed": seed, "finetune": ft_f1, "detector": det_f1, "encoder": enc_f1, "majority": majority,
                      "length": length_f1, "margin": det_f1 - best, "finetune_margin": ft_f1 - best,
                      "finetune_s": ft_s, "detector_s": det_s, "encoder_s": enc_s, "n_test": len(test)})
        print(f"seed {seed}: finetune {ft_f1:.3f} ({ft_s:.1f} s) | detector {det_f1:.3f} ({det_s:.2f} s) | encoder {enc_f1:.3f} ({enc_s:.2f} s) | "
              f"majority {majority:.3f} | chance 0.500 | length {length_f1:.3f} | margin {det_f1 - best:+.3f} "
              f"on {len(test)} unseen")
        for i, p in zip(test, probs):
            if rows[i]["label"] == 0:
                misses.setdefault(rows[i]["error"], []).append(int(p > 0.5))
    print("mean ± sd over seeds:")
    for key in ("finetune", "detector", "encoder", "majority", "length", "margin", "finetune_margin", "finetune_s",
                "detector_s", "encoder_s"):
        values = np.array([t[key] for t in table], dtype=float)
        print(f"  {key:15s} {np.nanmean(values):.3f} ± {np.nanstd(values):.3f}")
    if args.per_class:
        print("share of 'not fluent' items called fluent, per error class (all seeds):")
        for error, calls in sorted(misses.items()):
            print(f"  {error:14s} {np.mean(calls):.2f} of {len(calls)}")
    return table


if __name__ == "__main__":
    main()
