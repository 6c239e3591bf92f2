r"""Filter pipeline benchmark: the pipeline's chunks against raw spaCy ``nlp.pipe``, and the run-level steps at scale.

How to run (PostgreSQL and, optionally, Redis on this machine; every scenario works in scratch databases of its own,
created and dropped by this script, see benchmarks/scratch_db.py):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python benchmarks/filters.py \
        --captions 5000 --run-level-sizes 100000 1000000

    --only parse        only the parsing comparison (cc-distinct, cc-dup30; add --extra for the others)
    --only run-level    only the run-level scenario
    --profile DIR       a cProfile of each cc pipeline run, in DIR
    --db-name NAME      the prefix of the scratch databases (NAME_parse, NAME_runlevel_<size>; default: with
                        this process's id); --keep-db keeps them

1. Parsing comparison (``--captions`` N, ``--repeat`` rounds). The baseline is raw ``nlp.pipe`` with the very
   model the filter workers use: ``curation.pipeline.nlp.load`` with the union of the steps' spaCy needs, which
   installs the compiled attribute ruler (curation/pipeline/ruler.py) when SPACY_COMPILED_RULER is on, as in
   the workers. Each measurement runs in a fresh child process, spaCy loaded and warmed before the clock starts
   (in the pipeline's, also the filters' resources and, with Redis, its client: what a worker has at start);
   the order is raw, pipeline, raw, ... and each pipeline figure is paired with the mean of the raw runs around
   it (a shared machine drifts by 15-25% over minutes).
     cc-distinct  the conceptual-captions preset's text steps over N distinct alt-text captions; baseline: raw
                  parsing of the same N texts
     cc-dup30     the same steps over N captions of which 30% repeat an earlier text; baseline: raw parsing of
                  the collection's distinct texts only (0.7 N), i.e. the pipeline must handle its repeats for
                  almost nothing
     with --extra: cc-preset-dup30 (the preset's whole text path: + label overlap, hypernymization, rare
                  entity types) and ava (comment cleaning + informativeness with pre-fitted statistics)
   The measure is CPU time (resource.getrusage of the child process: user + system), which a busy shared
   machine distorts far less than wall time: CPU-seconds per 1,000 captions of the collection, the worker's
   PostgreSQL backend separately (read from /proc), and the ratio baseline CPU / pipeline CPU (>= 0.9 is
   the target: the pipeline's throughput per CPU-second at least 0.9 of raw parsing's). The wall-time
   ratio is printed too, for reference.

2. Run-level scenario (``--run-level-sizes``, ``--lda-topics``; see benchmarks/filters_run_level.py): a collection
   of S captions (four per image, 4% of the images exact copies of files in an older collection) bulk-inserted
   with INSERT ... SELECT, a run of image_format, exact_duplicate, hypernymize, rare_entity_types and lda_topics
   whose chunks are marked done with the chunk steps' decisions (image_format's keeps, hypernymize's entity
   types) written in SQL, then the run finalised (the run-level steps: duplicates, rare entity types, LDA; and
   the funnel) in a child process. Printed per size: that process's peak RSS (VmHWM) and CPU time, its
   PostgreSQL backend's CPU, the parent's getrusage(RUSAGE_CHILDREN).ru_maxrss (the largest of all its
   children so far), and the ratio of the largest size's peak to the
   smallest's (target <= 1.2 between 100k and 1M captions). The informativeness fit is not part of it: it runs
   when a run starts, not in finalise, parsing every caption chunk by chunk (about 0.5 CPU s per 1,000
   captions for the parse alone), and what it keeps is its n-gram counts, not the run's rows.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scratch_db import add_scratch_arguments, claim_redis_db, postgres_base_url, release_redis_db, scratch_database  # noqa: E402

AVA_STEPS = ["comment_clean", "informativeness"]
TARGET = 0.9  # baseline CPU / pipeline CPU

PEOPLE = ["Harrison Ford", "Meryl Streep", "Justin Timberlake", "a young woman", "an old man", "the mayor",
          "Tom Hanks", "a street musician", "two children", "a police officer", "Serena Williams", "a farmer"]
VERBS = ["attends", "walks along", "performs at", "sits on", "stands next to", "arrives at", "looks at",
         "plays near", "waits outside", "paints", "photographs", "leaves"]
OBJECTS = ["the premiere of the film", "a wooden bench", "the old castle", "a red car", "the festival stage",
           "the harbour", "a crowded market", "the museum entrance", "a snowy mountain", "the city hall",
           "a vintage airplane", "the river bank", "a small cafe", "the train station"]
PLACES = ["in Paris", "in Deauville, France", "in Franklin, Tennessee", "in Auckland", "near Boston",
          "in Balakot, Pakistan", "at the beach", "in the park", "in Los Angeles", ""]
DATES = ["on September 23, 2017", "on 6 April 2010", "in July 2007", "", "", "during the summer"]
BOILER = ["stock photo ", "", "", "", "", "", "", "", "", ""]
COMMENT_BITS = ["great shot", "nice colors", "love the light", "the composition works well", "too dark for me",
                "the rusty tractor against the golden wheat field", "sharp focus on the eyes",
                "the blue door contrasts with the white wall", "wonderful mood", "maybe crop the left side",
                "the reflection in the puddle is clever", "nice texture on the old wood", "congrats on the ribbon",
                "the sky is a bit blown out", "lovely soft bokeh behind the flower", "well done"]


def cc_text_steps() -> list[str]:
    """The conceptual-captions preset's text filters (boilerplate_drop ... profanity), as the preset lists them."""
    _setup_django()
    from curation.pipeline.presets import PRESETS

    names = [s["filter"] for s in PRESETS["conceptual-captions"]["steps"]]
    return names[names.index("boilerplate_drop"):names.index("profanity") + 1]


def cc_preset_text_steps() -> list[str]:
    """The preset's whole text path: the text filters, label overlap (the benchmark's images carry no labels:
    "not applicable"), hypernymization and the run-level rare-entity-type filter."""
    return cc_text_steps() + ["label_overlap", "hypernymize", "rare_entity_types"]


def make_captions(n: int, dup_rate: float, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    distinct = int(n * (1 - dup_rate))
    texts: list[str] = []
    seen = set()
    while len(texts) < distinct:
        text = " ".join(p for p in (
            rng.choice(BOILER) + rng.choice(PEOPLE), rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(PLACES),
            rng.choice(DATES)) if p).strip() + rng.choice([".", "", "."])
        text = text[0].upper() + text[1:]
        text = f"{text} ({len(texts)})" if text in seen else text
        seen.add(text)
        texts.append(text)
    while len(texts) < n:
        texts.append(rng.choice(texts[:distinct]))
    rng.shuffle(texts)
    return texts


def make_comments(n: int, seed: int = 5) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        parts = rng.sample(COMMENT_BITS, rng.randint(1, 3))
        out.append(", ".join(parts).capitalize() + rng.choice(["!", ".", "", " :)"]) + f" #{i}" * (i % 3 == 0))
    return out


# --- Child processes ------------------------------------------------------------------------------

def _setup_django():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu() -> float:
    """This process's CPU seconds so far (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_mib() -> float:
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")) / 1024


def _process_cpu(pid: int) -> float:
    """CPU seconds of a process of this machine (a worker's database backend, with PostgreSQL on
    127.0.0.1), 0 where it cannot be read (a database elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def child_raw(args):
    """Raw nlp.pipe over the texts, with the model the workers load for these steps."""
    _setup_django()
    from curation.pipeline import nlp, registry

    texts = json.loads(Path(args.texts).read_text())
    needs = frozenset().union(*(registry.get(name).needs for name in args.steps.split(",")))
    model = nlp.load(needs)  # exactly as the workers load it: the compiled ruler when SPACY_COMPILED_RULER is on
    list(model.pipe(texts[:200]))  # warm up
    cpu, start = _cpu(), time.perf_counter()
    for _ in model.pipe(texts, batch_size=256):
        pass
    elapsed, cpu = time.perf_counter() - start, _cpu() - cpu
    compiled = "match" in vars(model.get_pipe("attribute_ruler")) if "attribute_ruler" in model.pipe_names else False
    print(json.dumps({"seconds": elapsed, "cpu": cpu, "items": len(texts), "components": model.pipe_names,
                      "compiled": compiled, "peak_mib": _peak_mib()}))


def child_pipeline(args):
    """One worker doing every chunk of the run, as a Celery worker would, one after the other."""
    _setup_django()
    from django.db import connection

    from curation.models import FilterRun, RunChunk
    from curation.pipeline import executor, nlp, registry

    run = FilterRun.objects.get(pk=args.run)
    needs = frozenset().union(*(registry.get(step["filter"]).needs for step in run.snapshot))
    model = nlp.load(needs)
    list(model.pipe(json.loads(Path(args.texts).read_text())[:200]))  # the same warm-up as the baseline's
    for flt in executor.instantiate(run):  # load lazily-built resources (lexicons, detectors) first
        if hasattr(flt, "warm"):
            flt.warm()
    if os.environ.get("REDIS_URL"):
        # A Celery worker on Redis imported the client when it connected to its broker, at start; this
        # process would otherwise import it (some 0.1-0.3 CPU s) inside its first chunk.
        import redis  # noqa: F401
    indexes = list(RunChunk.objects.filter(run=run).order_by("index").values_list("index", flat=True))
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    profiler = None
    if args.profile:  # cProfile's own cost inflates the CPU figures of a profiled run: read its shares only
        import cProfile

        profiler = cProfile.Profile()
    cpu, backend_cpu, start = _cpu(), _process_cpu(backend), time.perf_counter()
    if profiler:
        profiler.enable()
    for index in indexes:
        executor.run_chunk(run.pk, index)
    if profiler:
        profiler.disable()
        profiler.dump_stats(args.profile)
    elapsed = time.perf_counter() - start
    cpu, backend_cpu = _cpu() - cpu, _process_cpu(backend) - backend_cpu
    run.refresh_from_db()
    print(json.dumps({"seconds": elapsed, "cpu": cpu, "backend_cpu": backend_cpu, "chunks": len(indexes),
                      "status": run.status, "peak_mib": _peak_mib()}))


# --- The parent -------------------------------------------------------------------------------------

def _child(kind: str, env: dict, *extra) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "--child", kind, *extra], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate()
    if proc.returncode:
        raise SystemExit(f"child failed:\n{err[-4000:]}")
    return json.loads(out.strip().splitlines()[-1])


def _prepare_run(texts: list[str], steps: list[str], name: str, env: dict, fit_texts: list[str] | None = None) -> int:
    """Create the collection (one image per text), the pipeline and the run; return the run id."""
    _setup_django()
    from curation.models import Caption, Collection, Image, Pipeline, text_hash
    from curation.pipeline import executor
    from curation.services import run_create

    collection = Collection.objects.create(name=f"{name}-{time.time_ns()}")
    images = Image.objects.bulk_create([Image(collection=collection, external_id=str(i), status="missing")
                                        for i in range(len(texts))], batch_size=5000)
    Caption.objects.bulk_create([Caption(image=img, text=t, text_hash=text_hash(t), origin="alt_text", source="bench")
                                 for img, t in zip(images, texts)], batch_size=5000)
    pipeline_steps = [{"filter": s} for s in steps]
    pipeline = Pipeline.objects.create(name=f"{name}-{time.time_ns()}", steps=pipeline_steps)
    run = run_create(collection=collection, pipeline=pipeline, enqueue=False)
    if fit_texts is not None:  # fit once on a separate corpus: the artifact is reused, as in production
        from curation.pipeline import registry
        from curation.pipeline.nlp import items_for_texts

        artifacts = {}
        for position, step in enumerate(run.snapshot):
            cls = registry.get(step["filter"])
            if cls.fits:
                state = cls(step["params"]).fit(items_for_texts(fit_texts, cls.needs))
                artifacts[str(position)] = executor.save_artifact(cls.name, state, params=step["params"]).pk
        run.artifacts = artifacts
        run.save(update_fields=["artifacts"])
    executor.start(run.pk, enqueue=lambda *a: None)
    return run.pk


def scenario(name, texts, steps, env, tmp: Path, fit_texts=None, repeat=1, profile_dir=None) -> dict:
    """CPU time and wall rate of raw nlp.pipe over the collection's distinct texts and of the pipeline over the
    whole collection (one worker, a fresh run each round), in the order raw, pipeline, raw, ..., raw."""
    distinct = list(dict.fromkeys(texts))
    texts_file, distinct_file = tmp / f"{name}.json", tmp / f"{name}-distinct.json"
    texts_file.write_text(json.dumps(texts))
    distinct_file.write_text(json.dumps(distinct))

    def raw_once():
        result = _result(_child("raw", env, "--texts", str(distinct_file), "--steps", ",".join(steps)))
        print(f"  {name}: raw nlp.pipe over {result['items']:,} distinct texts: {result['cpu']:.2f} CPU s, "
              f"{result['seconds']:.2f} s wall ({'+'.join(result['components'])}; compiled ruler: "
              f"{result['compiled']})", flush=True)
        return result

    raws, pipes = [raw_once()], []
    for _ in range(repeat):
        run_id = _prepare_run(texts, steps, name, env, fit_texts)
        profile = ["--profile", str(Path(profile_dir) / f"{name}-{len(pipes) + 1}.prof")] if profile_dir else []
        result = _result(_child("pipeline", env, "--run", str(run_id), "--texts", str(texts_file), *profile))
        if result["status"] != "done":
            raise SystemExit(f"{name}: the run ended {result['status']}")
        print(f"  {name}: pipeline over {len(texts):,} captions ({result['chunks']} chunks): {result['cpu']:.2f} "
              f"CPU s, its PostgreSQL backend {result['backend_cpu']:.2f} CPU s, {result['seconds']:.2f} s wall",
              flush=True)
        pipes.append(result)
        raws.append(raw_once())
    per_k = 1000 / len(texts)  # per 1,000 captions of the collection

    def paired(r, key):
        return (raws[r][key] + raws[r + 1][key]) / 2

    return {
        "name": name, "captions": len(texts), "distinct": len(distinct),
        "raw_cpu_k": statistics.median(r["cpu"] for r in raws) * per_k,
        "pipe_cpu_k": statistics.median(p["cpu"] for p in pipes) * per_k,
        "backend_cpu_k": statistics.median(p["backend_cpu"] for p in pipes) * per_k,
        "ratio": statistics.median(paired(r, "cpu") / p["cpu"] for r, p in enumerate(pipes)),
        "ratio_backend": statistics.median(paired(r, "cpu") / (p["cpu"] + p["backend_cpu"]) for r, p in enumerate(pipes)),
        "wall_ratio": statistics.median(paired(r, "seconds") / p["seconds"] for r, p in enumerate(pipes)),
        "peak": max(p["peak_mib"] for p in pipes), "raw_peak": max(r["peak_mib"] for r in raws),
    }


def parse_comparison(args, base: str, tmp: Path) -> list[dict]:
    found = []
    with scratch_database(base, f"{args.db_name}_parse", keep=args.keep_db) as db:
        os.environ.update({"DATABASE_URL": db.url, "LOG_LEVEL": "WARNING"})
        os.environ.pop("REDIS_URL", None)
        # Workers run as in production: with DEBUG on, Django would also keep every query and render it with
        # its parameters (the chunk's id arrays included) for the debug log.
        env = {**db.env, "DEBUG": "false"}
        if args.redis_url:  # start() publishes the repeated texts there; the worker shares decisions through it
            os.environ["REDIS_URL"] = env["REDIS_URL"] = args.redis_url
        steps = cc_text_steps()
        print(f"cc text steps: {', '.join(steps)}")
        for name, dup in (("cc-distinct", 0.0), ("cc-dup30", 0.3)):
            found.append(scenario(name, make_captions(args.captions, dup), steps, env, tmp, repeat=args.repeat,
                                  profile_dir=args.profile))
        if args.extra:
            found.append(scenario("cc-preset-dup30", make_captions(args.captions, 0.3), cc_preset_text_steps(), env,
                                  tmp, repeat=args.repeat))
            found.append(scenario("ava", make_comments(args.captions), AVA_STEPS, env, tmp,
                                  fit_texts=make_comments(5000, seed=99), repeat=args.repeat))
        from django.db import connections

        connections.close_all()  # let the scratch database be dropped
    return found


def print_parse_table(rows: list[dict], repeat: int) -> None:
    print(f"\nParsing comparison (CPU seconds per 1,000 captions of the collection; median of {repeat} round(s);"
          f" ratio = baseline CPU / pipeline CPU, paired with the raw runs around each pipeline run)")
    print(f"{'scenario':<16} {'captions':>8} {'distinct':>8} {'raw nlp.pipe':>12} {'pipeline':>9} {'+backend':>9} "
          f"{'ratio':>6} {'w/ backend':>10} {'wall ratio':>10} {'peak RSS':>9} {'target':>7}")
    for r in rows:
        ok = "ok" if r["ratio"] >= TARGET else "MISSED"
        print(f"{r['name']:<16} {r['captions']:>8,} {r['distinct']:>8,} {r['raw_cpu_k']:>12.3f} {r['pipe_cpu_k']:>9.3f} "
              f"{r['backend_cpu_k']:>9.3f} {r['ratio']:>6.2f} {r['ratio_backend']:>10.2f} {r['wall_ratio']:>10.2f} "
              f"{r['peak']:>5.0f} MiB {ok:>7}")
    print(f"raw nlp.pipe: the workers' own model (nlp.load, compiled attribute ruler as configured) over the "
          f"collection's distinct texts;\n+backend: the CPU of the worker's PostgreSQL backend (not in 'ratio'; "
          f"'w/ backend' counts it on the pipeline's side); target: ratio >= {TARGET}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--captions", type=int, default=5_000, help="captions per parsing scenario")
    parser.add_argument("--repeat", type=int, default=1,
                        help="pipeline runs per parsing scenario, each between two baseline runs; medians reported")
    parser.add_argument("--extra", action="store_true", help="also the cc preset's text path and ava scenarios")
    parser.add_argument("--run-level-sizes", type=int, nargs="+", default=[100_000, 1_000_000],
                        help="captions per run of the run-level scenario (the ratio: the last size's peak to the first's)")
    parser.add_argument("--lda-topics", type=int, default=20,
                        help="K of the run-level scenario's lda_topics step (the paper's 200 makes the fit ~10x slower)")
    parser.add_argument("--only", choices=["parse", "run-level"])
    parser.add_argument("--profile", metavar="DIR",
                        help="write a cProfile of each cc pipeline run to DIR (its CPU figures then include the "
                             "profiler's cost; read e.g. with python -m pstats)")
    parser.add_argument("--redis-url", default=None,
                        help="Redis database for the parsing scenarios' worker, as in production (default: with "
                             "REDIS_URL set, an empty database on its server, claimed for this run and emptied "
                             "afterwards; without, no Redis)")
    add_scratch_arguments(parser, "filters")
    args = parser.parse_args()
    base = postgres_base_url()
    if base is None:
        return 2
    import tempfile

    claimed = args.only != "run-level" and args.redis_url is None and bool(os.environ.get("REDIS_URL"))
    if claimed:
        args.redis_url = claim_redis_db(os.environ["REDIS_URL"])
    try:
        parsed, levels = [], []
        if args.only in (None, "parse"):
            with tempfile.TemporaryDirectory() as tmp:
                parsed = parse_comparison(args, base, Path(tmp))
        if args.only in (None, "run-level"):
            from filters_run_level import run_level_scenario

            levels = run_level_scenario(base, f"{args.db_name}_runlevel", args.run_level_sizes, args.lda_topics,
                                        keep=args.keep_db)
    finally:
        if claimed:
            release_redis_db(args.redis_url)
    if parsed:
        print_parse_table(parsed, args.repeat)
    if levels:
        from filters_run_level import print_run_level_table

        print_run_level_table(levels)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        kind = sys.argv[2]
        p = argparse.ArgumentParser()
        p.add_argument("--texts")
        p.add_argument("--steps")
        p.add_argument("--run", type=int)
        p.add_argument("--profile")
        a = p.parse_args(sys.argv[3:])
        {"raw": child_raw, "pipeline": child_pipeline}[kind](a)
    else:
        sys.exit(main())
