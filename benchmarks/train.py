"""Training throughput of the fluency classifier and the captioner: the engine's epoch loop against a
plain PyTorch loop on the same model and the same synthetic batches (no database, no storage).

    .venv/bin/python benchmarks/train.py                 # CPU (and CUDA when present)
    .venv/bin/python benchmarks/train.py --device cuda   # CUDA only, mixed precision on
    .venv/bin/python benchmarks/train.py --realistic     # 224 px, ViT-B/16-sized, cached features (captioner_scale.py)

Prints samples/s for both loops and their ratio; on CUDA also the device name and the peak GPU memory
(torch.cuda.max_memory_allocated) with mixed precision.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

import torch  # noqa: E402

from modeling import engine  # noqa: E402
from modeling.trainers import get_trainer  # noqa: E402
from modeling.trainers.base import Prepared  # noqa: E402


class _NoDbProgress:
    """Stands in for the engine's progress writer (the DB write is once a second: negligible)."""

    def set(self, **fields):
        pass

    def flush(self, force=False):
        return True

    def log(self, message):
        pass


def fluency_setup(n, g):
    trainer = get_trainer("fluency-lstm4")
    config = trainer.config({"batch_size": 64})
    branches = ["words", "pos", "src_words", "src_pos"]
    vocabs = {b: [f"t{i}" for i in range(2000 if "words" in b else 50)] for b in branches}
    examples = []
    for i in range(n):
        length = int(torch.randint(8, 25, (1,), generator=g))
        ids = {b: torch.randint(1, len(vocabs[b]), (length,), generator=g).tolist() for b in branches}
        examples.append({"label": i % 2, "ids": ids, "n_words": length, "source_length": length})
    info = {"vocabs": vocabs, "branches": branches, "embedding": config["embedding"], "hidden": config["hidden"],
            "dropout": config.get("dropout", 0.5)}
    return trainer, config, Prepared(examples, [], [], info, "", {})


def captioner_setup(n, g, decoder="lstm", image_size=64):
    trainer = get_trainer(f"captioner-{decoder}")
    config = trainer.config({"batch_size": 32, "image_size": image_size})
    vocab = ["<pad>", "<start>", "<end>", "<unk>"] + [f"w{i}" for i in range(1500)]
    from modeling.captioning import vocab as vocab_module

    vocab[:4] = list(vocab_module.SPECIALS)
    length = int(config["max_tokens"]) + 2
    tokens = torch.randint(4, len(vocab), (n, length), generator=g)
    tokens[:, 0] = vocab.index(vocab_module.SPECIALS[1])
    images = torch.randint(0, 256, (n, 3, image_size, image_size), dtype=torch.uint8, generator=g)
    split = {"images": images, "img": torch.arange(n), "tokens": tokens, "fluency": torch.ones(n)}
    info = {"vocab": vocab, "decoder": decoder, "max_tokens": int(config["max_tokens"])}
    return trainer, config, Prepared(split, [], [], info, "", {})


def plain_epoch(trainer, model, optimizer, prepared, config, device, epoch):
    g = torch.Generator().manual_seed(epoch)
    model.train()
    n, start = 0, time.perf_counter()
    use_amp = device.type == "cuda"
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp) if use_amp else None
    for batch in trainer.batches(prepared.train, config, epoch, g, True):
        with torch.autocast(device_type=device.type, enabled=use_amp):
            loss, k = trainer.loss(model, batch, device, config)
        optimizer.zero_grad(set_to_none=True)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        n += k
    if device.type == "cuda":
        torch.cuda.synchronize()
    return n / (time.perf_counter() - start)


def engine_epoch(trainer, model, optimizer, prepared, config, device, epoch):
    scaler = torch.amp.GradScaler("cuda", enabled=True) if device.type == "cuda" else None
    _, samples, seconds, _ = engine.run_epoch(trainer, model, optimizer, scaler, prepared, config, device, epoch,
                                               0, int(config["batch_size"]), _NoDbProgress(), [], 0, 0)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return samples / seconds


def bench(label, setup, device, n, epochs):
    g = torch.Generator().manual_seed(0)
    trainer, config, prepared = setup(n, g)
    config = dict(config, device=device.type, amp=True)
    results = {}
    for name, fn in (("plain", plain_epoch), ("engine", engine_epoch)):
        torch.manual_seed(0)
        model = trainer.build(config, prepared.info).to(device)
        optimizer = trainer.optimizer(model, config)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        fn(trainer, model, optimizer, prepared, config, device, 0)  # warm-up
        rates = [fn(trainer, model, optimizer, prepared, config, device, e + 1) for e in range(epochs)]
        peak = torch.cuda.max_memory_allocated(device) / 2 ** 20 if device.type == "cuda" else None
        results[name] = (max(rates), peak)
    plain, engine_rate = results["plain"][0], results["engine"][0]
    extra = f", peak GPU memory {results['engine'][1]:.0f} MiB (AMP)" if device.type == "cuda" else ""
    print(f"{label:<24} {device.type:<5} batch {config['batch_size']:<4} plain {plain:9.1f} samples/s   "
          f"engine {engine_rate:9.1f} samples/s   engine/plain {engine_rate / plain:5.2f}{extra}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--samples", type=int, default=0, help="synthetic samples per model (default by device)")
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs (best is reported)")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA was requested but this machine has no GPU.")
    devices = ["cpu", "cuda"] if args.device == "auto" and torch.cuda.is_available() else \
        ["cuda" if args.device == "cuda" else "cpu"]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    for name in devices:
        device = torch.device(name)
        if device.type == "cuda":
            print(f"GPU: {torch.cuda.get_device_name(0)}")
        n = args.samples or (2048 if device.type == "cuda" else 256)
        bench("fluency-lstm4", fluency_setup, device, n, args.epochs)
        bench("captioner-lstm", lambda k, g: captioner_setup(k, g, "lstm"), device, n, args.epochs)
        bench("captioner-transformer", lambda k, g: captioner_setup(k, g, "transformer"), device, n, args.epochs)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--realistic"]:  # 224 px, a ViT-B/16-sized encoder, cached features (captioner_scale.py)
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import captioner_scale

        captioner_scale.main()
    else:
        main()
