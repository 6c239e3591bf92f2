"""Embedding throughput on the platform's path, and FAISS query latency and recall.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python benchmarks/embed.py
        [--images 256] [--captions 512] [--batch-size 64] [--repeats 2] [--sizes 100000,1000000]
        [--queries 200] [--skip-embed] [--skip-faiss] [--quick] [--keep-db]

1. Embedding. A CLIP of ViT-B/32 size (vision: hidden 768, 12 layers, patch 32, image 224; text: hidden 512,
   12 layers; projection 512; random weights, which cost the same time as trained ones) is saved with
   ``save_pretrained`` into a temporary models dir and registered with ``pack.model_add_pretrained``
   in a scratch PostgreSQL database. ``--images`` Image rows, each its own file copied from the photos in
   ../shared/data/openimages-cc-by (skipped, saying so, where absent), go through
   ``pack.embeddings.store.image_vectors`` (read from storage, decode, encode, store rows), and
   ``--captions`` distinct synthetic alt-text captions through ``text_vectors``. Baseline in the same run: a
   plain loop of the same loaded model (processor or tokenizer, then get_*_features) over the same images
   already decoded / the same texts, same batch size. Rounds alternate baseline and platform (stored rows
   deleted before each platform round); printed: items/s, CPU seconds per item (this process's CPU time,
   all threads, / items; plus the PostgreSQL backend's), the ratio platform/plain (target >= 0.9). With CUDA:
   batch size, AMP dtype, peak GPU memory and torch.cuda.utilization() sampled during the platform rounds.
2. FAISS. For each of ``--sizes`` n: n clustered synthetic vectors of dimension 512 (a mixture of Gaussians
   on the sphere, n/1000 clusters, each spread along its own 16 directions, plus isotropic noise; uniform
   random vectors have no neighbourhood structure and are not what embeddings look like) indexed by
   ``pack.embeddings.ann`` as the platform would (``choose``, then ``build`` from 100k chunks with a random
   training sample); ``--queries`` held-out vectors searched one at a time, k=10. Printed: the index chosen,
   build seconds, p50/p95 latency, recall@10 against exact search (faiss.knn), at the default nprobe and
   around it. Target at 1M: p95 <= 50 ms with recall@10 >= 0.95.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from scratch_db import add_scratch_arguments, postgres_base_url, scratch_database  # noqa: E402

PHOTOS = ROOT.parent / "shared" / "data" / "openimages-cc-by"
MODEL_NAME = "bench-vit-b-32"
PLAIN_IMAGES, PLATFORM_IMAGES = "plain image loop (decoded images)", "platform image_vectors (from files)"
PLAIN_TEXTS, PLATFORM_TEXTS = "plain text loop", "platform text_vectors"


# --- the model ------------------------------------------------------------------------------------------------

def build_vit_b32(path: Path, corpus: list[str]) -> Path:
    """A ViT-B/32-sized CLIP with random weights, and a byte-level BPE trained on the benchmark's captions (so
    a caption is about as many tokens as with CLIP's own tokenizer, a word or so each)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import CLIPConfig, CLIPImageProcessorPil, CLIPModel, PreTrainedTokenizerFast

    core = Tokenizer(models.BPE(unk_token="<|endoftext|>"))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=8000, special_tokens=["<|startoftext|>", "<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    bos, eos = core.token_to_id("<|startoftext|>"), core.token_to_id("<|endoftext|>")
    core.post_processor = processors.TemplateProcessing(
        single="<|startoftext|> $A <|endoftext|>", special_tokens=[("<|startoftext|>", bos), ("<|endoftext|>", eos)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<|startoftext|>", eos_token="<|endoftext|>",
                                        pad_token="<|endoftext|>", unk_token="<|endoftext|>", model_max_length=77)
    torch.manual_seed(0)
    config = CLIPConfig(
        text_config=dict(vocab_size=49408, hidden_size=512, intermediate_size=2048, num_hidden_layers=12,
                         num_attention_heads=8, max_position_embeddings=77, bos_token_id=bos, eos_token_id=eos,
                         pad_token_id=eos),
        vision_config=dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
                           image_size=224, patch_size=32),
        projection_dim=512)
    path.mkdir(parents=True, exist_ok=True)
    CLIPModel(config).eval().save_pretrained(path, safe_serialization=True)
    CLIPImageProcessorPil(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224}).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


# --- measuring ------------------------------------------------------------------------------------------------

def _backend_cpu() -> float | None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None  # PostgreSQL on another machine


class GpuSampler:
    """torch.cuda.utilization() every 0.2 s in a thread, while a block runs (CUDA only)."""

    def __init__(self):
        self.samples: list[int] = []
        self._stop = threading.Event()

    def _run(self):
        import torch

        while not self._stop.wait(0.2):
            try:
                self.samples.append(int(torch.cuda.utilization()))
            except Exception:  # noqa: BLE001 - no NVML: nothing to sample
                return

    def __enter__(self):
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def summary(self) -> str:
        if not self.samples:
            return "utilization not available (NVML)"
        return f"utilization mean {statistics.mean(self.samples):.0f}% max {max(self.samples)}% " \
               f"({len(self.samples)} samples)"


def timed(fn, n_items: int) -> dict:
    backend, cpu, wall = _backend_cpu(), time.process_time(), time.perf_counter()
    fn()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    after = _backend_cpu()
    pg = (after - backend) if backend is not None and after is not None else None
    return {"rate": n_items / wall, "wall": wall, "cpu_per_item": cpu / n_items,
            "pg_per_item": pg / n_items if pg is not None else None}


def _line(label: str, m: dict) -> str:
    pg = f", PostgreSQL {m['pg_per_item'] * 1000:.2f} CPU ms/item" if m["pg_per_item"] is not None else ""
    return f"  {label:<34} {m['rate']:8.1f} items/s  {m['wall']:6.1f} s  {m['cpu_per_item']:.3f} CPU s/item{pg}"


# --- 1. embedding ---------------------------------------------------------------------------------------------

def make_images(n: int, media: Path) -> list[int]:
    from curation.models import Collection, Image

    photos = sorted(PHOTOS.glob("*.jpg"))
    collection = Collection.objects.create(name="bench embed", source_kind=Collection.SourceKind.UPLOAD)
    (media / "bench").mkdir(parents=True, exist_ok=True)
    rows = []
    for k in range(n):
        name = f"bench/{k:06d}.jpg"
        shutil.copyfile(photos[k % len(photos)], media / name)
        rows.append(Image(collection=collection, file=name, sha256=f"{k + 1:064x}", format="JPEG",
                          status=Image.Status.READY, external_id=f"bench-{k}"))
    return [img.pk for img in Image.objects.bulk_create(rows, batch_size=1000)]


def plain_images(encoder, images: list, batch_size: int) -> None:
    import torch

    model, processor = encoder.model, encoder.processor
    for start in range(0, len(images), batch_size):
        pixels = processor(images=images[start:start + batch_size], return_tensors="pt")["pixel_values"]
        with torch.inference_mode(), encoder._autocast():
            out = model.get_image_features(pixel_values=pixels.to(encoder.device))
            out = out if hasattr(out, "float") else out.pooler_output
            torch.nn.functional.normalize(out.float(), dim=-1).cpu().numpy()


def plain_texts(encoder, texts: list[str], batch_size: int) -> None:
    import torch

    for start in range(0, len(texts), batch_size):
        batch = encoder.tokenizer(texts[start:start + batch_size], padding=True, truncation=True, max_length=77,
                                  return_tensors="pt")
        with torch.inference_mode(), encoder._autocast():
            out = encoder.model.get_text_features(**{k: v.to(encoder.device) for k, v in batch.items()})
            out = out if hasattr(out, "float") else out.pooler_output
            torch.nn.functional.normalize(out.float(), dim=-1).cpu().numpy()


def embed_part(args, workdir: Path) -> None:
    import torch
    from filters import make_captions

    import pack
    from pack.embeddings import store
    from pack.models import ImageEmbedding, TextEmbedding

    captions = make_captions(args.captions, 0.0, seed=21)
    started = time.perf_counter()
    build_vit_b32(workdir / "models" / MODEL_NAME, captions)
    model = pack.model_add_pretrained(directory=MODEL_NAME, name=MODEL_NAME, licence="random weights (benchmark)",
                                      source="benchmarks/embed.py")
    encoder = pack.load(model)
    print(f"model: {model.architecture}, {model.parameters / 1e6:.1f}M parameters, dim {model.embedding_dim}, "
          f"device {encoder.device}, torch threads {torch.get_num_threads()}; built, registered and loaded in "
          f"{time.perf_counter() - started:.0f} s")
    cuda = encoder.device == "cuda"
    if cuda:
        dtype = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        print(f"CUDA: {torch.cuda.get_device_name()}, AMP autocast {dtype}, batch size {args.batch_size}")

    results: dict[str, list[dict]] = {}
    if not PHOTOS.is_dir() or not any(PHOTOS.glob("*.jpg")):
        print(f"images: skipped, the shared photos are absent ({PHOTOS} not found)")
    else:
        ids = make_images(args.images, workdir / "media")
        decoded = [im for _, im in store.decode_all(
            [(pk, name) for pk, name in _files(ids)])[0]]
        n_photos = len(list(PHOTOS.glob("*.jpg")))
        print(f"images: {len(ids)} Image rows, each its own file, copied from the {n_photos} photos in {PHOTOS}")
        plain_images(encoder, decoded[:args.batch_size], args.batch_size)  # warm-up: allocator, kernels
        sampler = GpuSampler() if cuda else None

        def plain():
            results.setdefault(PLAIN_IMAGES, []).append(
                timed(lambda: plain_images(encoder, decoded, args.batch_size), len(ids)))

        def platform():
            ImageEmbedding.objects.filter(model=model).delete()
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            with sampler or contextlib.nullcontext():
                results.setdefault(PLATFORM_IMAGES, []).append(timed(
                    lambda: store.image_vectors(model, ids, encoder=encoder, batch_size=args.batch_size), len(ids)))

        alternate(plain, platform, args.repeats)
        stored = ImageEmbedding.objects.filter(model=model).exclude(vector=b"").count()
        print(f"  {stored} image vectors stored by the last platform round")
        if cuda:
            print(f"  GPU: peak memory {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB, {sampler.summary()}")

    plain_texts(encoder, captions[:args.text_batch_size], args.text_batch_size)

    def plain():
        results.setdefault(PLAIN_TEXTS, []).append(
            timed(lambda: plain_texts(encoder, captions, args.text_batch_size), len(captions)))

    def platform():
        TextEmbedding.objects.filter(encoder=model.key).delete()
        results.setdefault(PLATFORM_TEXTS, []).append(timed(
            lambda: store.text_vectors(model, captions, encoder=encoder, batch_size=args.text_batch_size),
            len(captions)))

    alternate(plain, platform, args.repeats)
    print(f"captions: {len(captions)} distinct synthetic alt-text captions (benchmarks/filters.py make_captions)")
    _report_embedding(results, args)


def _files(ids):
    from curation.models import Image

    return Image.objects.filter(pk__in=ids).order_by("pk").values_list("pk", "file")


def alternate(plain, platform, repeats: int) -> None:
    """Rounds in ABBA order, so a drift in the machine's load (its cores are shared) favours neither."""
    for r in range(repeats):
        for step in ((plain, platform) if r % 2 == 0 else (platform, plain)):
            step()


def _report_embedding(results: dict[str, list[dict]], args) -> None:
    print(f"\nembedding, {args.repeats} round(s) each, baseline and platform alternating (ABBA); medians of rounds")
    for label, rounds in results.items():
        print(_line(label, {key: statistics.median(m[key] for m in rounds) if rounds[0][key] is not None else None
                            for key in rounds[0]}))
    for what, plain, platform in (("images", PLAIN_IMAGES, PLATFORM_IMAGES), ("captions", PLAIN_TEXTS, PLATFORM_TEXTS)):
        if plain not in results:
            continue
        pairs = list(zip(results[platform], results[plain]))
        rates = [p["rate"] / b["rate"] for p, b in pairs]
        cpus = [b["cpu_per_item"] / p["cpu_per_item"] for p, b in pairs]
        print(f"  {what}: platform/plain items/s {statistics.median(rates):.2f} (rounds {', '.join(f'{r:.2f}' for r in rates)}); "
              f"by CPU per item {statistics.median(cpus):.2f} (rounds {', '.join(f'{r:.2f}' for r in cpus)}); "
              f"target >= 0.9")
    print("  (items/s varies with what else runs on the machine; CPU seconds per item does not, much)")


# --- 2. FAISS -------------------------------------------------------------------------------------------------

def clustered(n: int, dim: int, *, seed: int = 1, rank: int = 16, spread: float = 0.7, noise: float = 0.25,
              chunk: int = 100_000):
    """Chunks of a mixture of Gaussians on the sphere: n/1000 unit centres, each cluster spread along its own
    ``rank`` random directions (std ``spread``) plus isotropic noise of norm ``noise``, then normalised."""
    import numpy as np

    rng = np.random.default_rng(seed)
    clusters = max(8, n // 1000)
    centres = rng.standard_normal((clusters, dim), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    bases = rng.standard_normal((clusters, rank, dim), dtype=np.float32) / np.float32(np.sqrt(dim))
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        r = np.random.default_rng([seed, start])
        which = r.integers(0, clusters, m)
        x = r.standard_normal((m, dim), dtype=np.float32) * np.float32(noise / np.sqrt(dim))
        x += centres[which]
        z = r.standard_normal((m, rank), dtype=np.float32) * np.float32(spread)
        order = np.argsort(which, kind="stable")
        bounds = np.searchsorted(which[order], np.arange(clusters + 1))
        for c in range(clusters):
            rows = order[bounds[c]:bounds[c + 1]]
            if len(rows):
                x[rows] += z[rows] @ bases[c]
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        yield x


def faiss_size(n: int, args) -> list[dict]:
    import faiss
    import numpy as np

    from pack.embeddings import ann

    tick = time.perf_counter()
    x = np.concatenate(list(clustered(n + args.queries, args.dim)))
    base, queries = x[:n], x[n:]
    ids = np.arange(n, dtype=np.int64)
    made = time.perf_counter() - tick
    params = ann.choose(n, args.dim)
    sample = base[np.random.default_rng(2).choice(n, params["train_size"], replace=False)] \
        if "train_size" in params else None
    chunks = ((ids[s:s + 100_000], base[s:s + 100_000]) for s in range(0, n, 100_000))
    tick, cpu = time.perf_counter(), time.process_time()
    index = ann.build(args.dim, chunks, total=n, train_vectors=sample)
    build, build_cpu = time.perf_counter() - tick, time.process_time() - cpu
    tick = time.perf_counter()
    truth_scores, truth = faiss.knn(queries, base, 10, metric=faiss.METRIC_INNER_PRODUCT)
    exact = time.perf_counter() - tick
    print(f"\n{n:,} x {args.dim}: vectors made in {made:.0f} s; nearest neighbour cosine mean "
          f"{truth_scores[:, 0].mean():.2f}, 10th {truth_scores[:, 9].mean():.2f}; exact search of "
          f"{args.queries} queries (batched) {exact:.1f} s; index {params}")
    nprobes = [None]
    if params["kind"] == "ivf":
        p = params["nprobe"]
        nprobes = [p // 4, p // 2, p, min(2 * p, params["nlist"])]
    rows = []
    for nprobe in nprobes:
        latencies, found = [], []
        for q in queries:
            t = time.perf_counter()
            found.append(ann.search(index, q, 10, None if nprobe is None else {"nprobe": nprobe})[1][0])
            latencies.append(time.perf_counter() - t)
        recall = float(np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found, truth)]))
        rows.append({"n": n, "kind": params["kind"], "nlist": params.get("nlist", "-"),
                     "nprobe": "-" if nprobe is None else nprobe, "default": nprobe in (None, params.get("nprobe")),
                     "build": build, "build_cpu": build_cpu, "p50": np.percentile(latencies, 50) * 1000,
                     "p95": np.percentile(latencies, 95) * 1000, "recall": recall,
                     "mb": len(ann.to_bytes(index)) / 2**20 if nprobe == nprobes[-1] else None})
    del index, base, x
    return rows


def faiss_part(args) -> None:
    import faiss

    print(f"\nFAISS {faiss.__version__}, {faiss.omp_get_max_threads()} OpenMP threads. Vectors: clustered "
          f"synthetic (mixture of Gaussians on the sphere, n/1000 clusters, each spread along 16 directions, "
          f"plus noise); uniform random vectors have no neighbourhood structure and are not what embeddings "
          f"look like. Single queries, k=10, {args.queries} held-out queries per size.")
    rows = []
    for n in args.sizes:
        rows += faiss_size(n, args)
    print(f"\n{'n':>9} {'index':>5} {'nlist':>5} {'nprobe':>6} {'build s':>8} {'build CPU s':>11} {'p50 ms':>7} "
          f"{'p95 ms':>7} {'recall@10':>9} {'MiB':>6}")
    for r in rows:
        mark = " <- default" if r["default"] else ""
        mb = f"{r['mb']:6.0f}" if r["mb"] is not None else f"{'':>6}"
        print(f"{r['n']:>9,} {r['kind']:>5} {r['nlist']:>5} {r['nprobe']:>6} {r['build']:8.1f} {r['build_cpu']:11.1f} "
              f"{r['p50']:7.2f} {r['p95']:7.2f} {r['recall']:9.3f} {mb}{mark}")
    largest = [r for r in rows if r["n"] == max(args.sizes) and r["default"]]
    if largest:
        r = largest[0]
        print(f"target at the largest size ({r['n']:,}): p95 {r['p95']:.1f} ms <= 50 and recall@10 {r['recall']:.3f} "
              f">= 0.95: {'met' if r['p95'] <= 50 and r['recall'] >= 0.95 else 'NOT met'}")


# --- main -----------------------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=256, help="Image rows (each its own file) to embed")
    parser.add_argument("--captions", type=int, default=512, help="distinct captions to embed")
    parser.add_argument("--batch-size", type=int, default=64, help="image batch size (settings.EMBED_BATCH_SIZE)")
    parser.add_argument("--text-batch-size", type=int, default=256, help="caption batch size (text_vectors' default)")
    parser.add_argument("--repeats", type=int, default=2, help="alternating rounds of baseline and platform")
    parser.add_argument("--sizes", default="100000,1000000", help="FAISS index sizes, comma-separated")
    parser.add_argument("--queries", type=int, default=200, help="single queries timed per FAISS size")
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--skip-embed", action="store_true")
    parser.add_argument("--skip-faiss", action="store_true")
    parser.add_argument("--quick", action="store_true", help="smoke run: 32 images, 128 captions, 2 rounds, 60k vectors")
    add_scratch_arguments(parser, "embed")
    args = parser.parse_args()
    if args.quick:
        args.images, args.captions, args.repeats, args.sizes, args.queries = 32, 128, 2, "60000", 50
        args.batch_size = min(args.batch_size, 16)
    args.sizes = [int(s) for s in str(args.sizes).split(",") if s.strip()]
    if not args.skip_embed:
        base = postgres_base_url()
        if base is None:
            return 2
        with tempfile.TemporaryDirectory(prefix="bench-embed-") as tmp, \
                scratch_database(base, args.db_name, keep=args.keep_db) as db:
            workdir = Path(tmp)
            os.environ.update({"DATABASE_URL": db.url, "LOG_LEVEL": "WARNING", "STORAGE_BACKEND": "local",
                               "MEDIA_ROOT": str(workdir / "media"),
                               "CAPTIONLAB_MODELS_DIR": str(workdir / "models")})
            os.environ.pop("REDIS_URL", None)
            import django

            django.setup()
            try:
                embed_part(args, workdir)
            finally:
                from django.db import connections

                connections.close_all()
    if not args.skip_faiss:
        faiss_part(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
