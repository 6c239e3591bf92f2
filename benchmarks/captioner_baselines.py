"""The cost of judging a captioner against trivial captioners (modeling/trainers/captioner_judge.py), against the
cost of the run's own evaluation on the same test images.

    .venv/bin/python benchmarks/captioner_baselines.py                 # 100,000 training captions, 1,000 test images
    .venv/bin/python benchmarks/captioner_baselines.py --quick         # 10,000 captions, 100 test images
    .venv/bin/python benchmarks/captioner_baselines.py --device cuda   # the evaluation's beam search on a GPU

Synthetic but realistically sized data: 20,000 training images with five captions each (100,000 captions, 8-14
words drawn from a Zipf-distributed 10,000-word vocabulary), 768-d image features in 500 clusters (a ViT-B/16's
pooled vector), and test images with five references each. Measured, in one process:

- retrieval: the FAISS exact search over the training features and the consensus caption (Devlin et al. 2015) of
  the k = 30 nearest images' 150 captions, for every test image (captioning.baselines.retrieval_captions);
- baselines in all: retrieval, the most frequent caption, and scoring both with BLEU/ROUGE-L/CIDEr per image;
- the run's evaluation: beam search (beam 5, 15 tokens) with a default-size captioner-lstm on cached features
  (CaptionerTrainer.generate) and the caption metrics of its output (METEOR off in both, as without Java).

Prints each time and the ratio of the baselines to the evaluation (target: under 10%). Imports are warmed on both
sides first (a worker pays them once per process). No database is touched.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.captioner_scale import setup_django  # noqa: E402


def synthetic(n_images: int, per_image: int, n_test: int, dim: int, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(10_000)])
    zipf = 1.0 / np.arange(1, len(words) + 1)
    zipf /= zipf.sum()
    centres = rng.normal(size=(500, dim)).astype(np.float32)
    topics = rng.integers(0, 500, n_images + n_test)
    topic_words = rng.choice(len(words), size=(500, 40), p=zipf)  # each cluster talks about its own words

    def caption(topic):
        length = int(rng.integers(8, 15))
        own = rng.random(length) < 0.6
        picks = np.where(own, topic_words[topic][rng.integers(0, 40, length)], rng.choice(len(words), length, p=zipf))
        return " ".join(words[picks])

    feats = centres[topics] + 0.5 * rng.normal(size=(n_images + n_test, dim)).astype(np.float32)
    caps = [[caption(t) for _ in range(per_image)] for t in topics]
    return feats[:n_images], caps[:n_images], feats[n_images:], caps[n_images:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train-images", type=int, default=20_000)
    parser.add_argument("--per-image", type=int, default=5)
    parser.add_argument("--test-images", type=int, default=1_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.train_images, args.test_images = 2_000, 100
    print(f"django: {setup_django()}", flush=True)
    import torch

    from modeling.captioning import baselines
    from modeling.captioning.decoders import Captioner
    from modeling.captioning.metrics import caption_metrics
    from modeling.captioning.vocab import Vocab
    from modeling.trainers import get_trainer

    train_f, train_c, test_f, test_c = synthetic(args.train_images, args.per_image, args.test_images, args.dim)
    refs = dict(enumerate(test_c))
    n_caps = sum(len(c) for c in train_c)
    print(f"{n_caps:,} training captions on {len(train_c):,} images, {len(test_c):,} test images, {args.dim}-d "
          f"features, k={baselines.DEFAULT_K}")

    # A worker imports scikit-learn, FAISS and the captioner's modules once per process (4 s for scikit-learn on a
    # busy machine): warmed here on both sides, so that the times are those of each further run.
    baselines.retrieval_captions(train_f[:50], train_c[:50], test_f[:2], k=5)
    start = time.perf_counter()
    found = baselines.retrieval_captions(train_f, train_c, test_f, k=baselines.DEFAULT_K)
    retrieval_s = time.perf_counter() - start
    frequent = baselines.most_frequent_caption([t for c in train_c for t in c])
    caption_metrics(refs, dict(enumerate(found)), meteor=False, per_image=True)
    caption_metrics(refs, dict.fromkeys(refs, frequent), meteor=False, per_image=True)
    baselines_s = time.perf_counter() - start

    trainer = get_trainer("captioner-lstm")
    vocab = Vocab.build([t for c in train_c for t in c], min_count=1, max_tokens=15)
    info = {"vocab": vocab.to_json(), "max_tokens": 15}
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = Captioner(len(vocab), "lstm", embed=256, hidden=256, dropout=0.3, max_len=17, pooled_dim=args.dim,
                      grid_dim=args.dim).to(device).eval()
    pooled = torch.from_numpy(test_f)
    grid = pooled[:, None, :]
    trainer.generate(model, (pooled[:1], grid[:1]), info, device, beam_size=5)
    start = time.perf_counter()
    generated = trainer.generate(model, (pooled, grid), info, device, beam_size=5)
    caption_metrics(refs, {i: text for i, (text, _) in enumerate(generated)}, meteor=False, per_image=True)
    evaluation_s = time.perf_counter() - start

    print(f"retrieval (FAISS search + consensus): {retrieval_s:8.2f} s  ({1000 * retrieval_s / len(test_c):.2f} ms "
          "per test image)")
    print(f"baselines in all (+ most frequent, scoring): {baselines_s:8.2f} s")
    print(f"the run's evaluation (beam 5 + metrics, {args.device}): {evaluation_s:8.2f} s")
    print(f"ratio retrieval / evaluation: {retrieval_s / evaluation_s:.1%}; baselines / evaluation: "
          f"{baselines_s / evaluation_s:.1%} (target < 10%)")


if __name__ == "__main__":
    main()
