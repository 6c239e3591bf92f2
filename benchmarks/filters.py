"""Filter pipeline benchmark: database rows in, decisions out, against raw spaCy ``nlp.pipe``.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python benchmarks/filters.py

Scenarios (each in fresh child processes; spaCy is loaded before timing starts in both):
  cc-distinct   the conceptual-captions TEXT steps over N distinct alt-text captions
  cc-dup30      the same with 30% exact duplicate texts (normal in web alt-text)
  cc-2workers   cc-distinct with two worker processes, each taking the next pending chunk when it is free
                (their clocks start together, once both have loaded spaCy)
  cc-preset-dup30  the preset's whole text path (text filters, label overlap, hypernymization, rare entity
                types) over the cc-dup30 captions
  ava           comment cleaning + informativeness (pre-fitted statistics) over M comments
  ava-2workers  the same with two worker processes (with REDIS_URL or --redis-url, as in production, they share
                the decisions of comments that repeat in the collection: curation/pipeline/shared.py)
The baseline of each is raw ``nlp.pipe`` over the same texts with the same spaCy components, timed
in a child process of its own, before and after each round of pipeline runs (``--repeat`` rounds):
each pipeline rate is compared with the mean of the two baseline rates around it. Two baselines:
  spaCy     the components as spaCy ships them (``spacy.load``); the targets are ratios to this one
  compiled  the same with the attribute ruler's compiled matcher, which the platform's workers use
            (curation/pipeline/ruler.py: the same annotations, found faster); the ratio to it is
            everything the pipeline does besides parsing, set against the parse it actually runs
Prints every measurement, then the medians: rates, paired ratios, two-worker scaling, and each
process's peak RSS (VmHWM).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scratch_db import (add_scratch_arguments, claim_redis_db, postgres_base_url,  # noqa: E402
                        release_redis_db, scratch_database)

CC_TEXT_STEPS = [
    "boilerplate_drop", "boilerplate_crop", "caption_length", "language", "pos_presence", "noun_ratio",
    "unique_word_ratio", "token_repetition", "capitalisation", "unknown_tokens", "polarity", "profanity",
]
AVA_STEPS = ["comment_clean", "informativeness"]
# The conceptual-captions preset's whole text path: the text filters, image & text label overlap (the
# benchmark's images carry no labels: "not applicable"), hypernymization (a child caption per rewritten
# alt-text) and the run-level rare-entity-type filter. Its spaCy components are the parser's and NER's too.
CC_PRESET_TEXT_STEPS = CC_TEXT_STEPS + ["label_overlap", "hypernymize", "rare_entity_types"]

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
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "captionlab.settings")
    import django

    django.setup()


_TICK = os.sysconf("SC_CLK_TCK")


def _peak_mib() -> float:
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")) / 1024


def child_raw(args):
    _setup_django()
    from curation.pipeline import nlp, registry

    texts = json.loads(Path(args.texts).read_text())
    needs = frozenset().union(*(registry.get(name).needs for name in args.steps.split(",")))
    model = nlp.load(needs)  # the compiled ruler or spaCy's matcher, as SPACY_COMPILED_RULER says
    list(model.pipe(texts[:200]))  # warm up
    start = time.perf_counter()
    for _ in model.pipe(texts, batch_size=256):
        pass
    elapsed = time.perf_counter() - start
    compiled = "match" in vars(model.get_pipe("attribute_ruler")) if "attribute_ruler" in model.pipe_names else False
    print(json.dumps({"seconds": elapsed, "items": len(texts), "components": model.pipe_names, "compiled": compiled,
                      "peak_mib": _peak_mib()}))


def child_pipeline(args):
    _setup_django()
    from curation.models import FilterRun, RunChunk
    from curation.pipeline import executor, nlp, registry

    run = FilterRun.objects.get(pk=args.run)
    needs = frozenset().union(*(registry.get(step["filter"]).needs for step in run.snapshot))
    model = nlp.load(needs)
    list(model.pipe(json.loads(Path(args.texts).read_text())[:200]))  # the same warm-up as the baseline's
    for flt in executor.instantiate(run):  # load lazily-built resources (lexicons, detectors) first
        if hasattr(flt, "warm"):
            flt.warm()
    from django.db import connection

    def next_chunk():
        """The next pending chunk, as a Celery worker with prefetch 1 and late acks takes the next task when it
        is free (settings: CELERY_WORKER_PREFETCH_MULTIPLIER = 1): a faster worker takes more chunks."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {RunChunk._meta.db_table} SET status = %s WHERE id = (SELECT id FROM {RunChunk._meta.db_table} "
                "WHERE run_id = %s AND status = %s ORDER BY index LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING index",
                [RunChunk.Status.RUNNING, run.pk, RunChunk.Status.PENDING])
            row = cursor.fetchone()
        return None if row is None else row[0]

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    _barrier(Path(args.ready), args.worker, args.workers)
    done = 0
    began, cpu, backend_cpu = time.time(), time.process_time(), _process_cpu(backend)
    start = time.perf_counter()
    while (index := next_chunk()) is not None:
        executor.run_chunk(run.pk, index)
        done += 1
    elapsed = time.perf_counter() - start
    from curation.pipeline import shared

    print(json.dumps({"seconds": elapsed, "chunks": done, "peak_mib": _peak_mib(), "shared": shared.STATS,
                      "cpu": time.process_time() - cpu, "backend_cpu": _process_cpu(backend) - backend_cpu,
                      "backend": backend, "began": began, "ended": time.time()}))


def _barrier(folder: Path, worker: int, workers: int) -> None:
    """Wait until every worker of the run has loaded spaCy and warmed its filters: the clocks start
    together, as for Celery workers already running when a run is queued. (Loading takes 2-4 s and
    differs between processes; a worker that starts early takes more chunks, and the run's wall time
    would measure the stagger.)"""
    (folder / f"ready-{worker}").touch()
    while len(list(folder.glob("ready-*"))) < workers:
        time.sleep(0.005)


# --- The parent -------------------------------------------------------------------------------------

def _process_cpu(pid: int) -> float:
    """CPU seconds of a process of this machine (a worker's database backend, with PostgreSQL on
    127.0.0.1), 0 where it cannot be read (a database elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _postgres_pids() -> list[int]:
    """This machine's PostgreSQL processes now (from /proc)."""
    pids = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() == "postgres":
                        pids.append(int(pid))
            except OSError:
                continue
    return pids


def _idle_cpu() -> float:
    """Idle core-seconds of the whole machine so far (/proc/stat: idle and iowait)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    return (int(fields[3]) + int(fields[4])) / _TICK


class CpuAccounting:
    """Where the workers' wall time goes, beside their own CPU (which each worker reports with its
    backend's): the CPU of the PostgreSQL server's other processes (WAL writer, checkpointer, ...,
    those running when the workers start) and the machine's idle core-seconds, sampled every 100 ms
    and read off between the first worker's start and the last one's end. Only meaningful with
    PostgreSQL on this machine, as with the default DATABASE_URL."""

    def __init__(self):
        import threading

        self.server = _postgres_pids()
        self.samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while not self._stop.is_set():
            self._take()
            self._stop.wait(0.1)

    def _take(self):
        self.samples.append((time.time(), sum(_process_cpu(pid) for pid in self.server), _idle_cpu()))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._take()

    def between(self, began: float, ended: float) -> tuple[float, float]:
        """The server's other processes' CPU seconds and idle core-seconds from ``began`` to ``ended``."""
        first = min(self.samples, key=lambda s: abs(s[0] - began))
        last = min(self.samples, key=lambda s: abs(s[0] - ended))
        return last[1] - first[1], last[2] - first[2]


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


BASELINES = {"spacy": "false", "compiled": "true"}  # SPACY_COMPILED_RULER of each baseline's child


def scenario(name, texts, steps, env, tmp: Path, workers_list=(1,), fit_texts=None, repeat=1):
    """Rates of raw nlp.pipe (both baselines) and of the pipeline with each number of workers, each in fresh
    processes on a fresh run. Measured ``repeat`` times in the order raw, pipeline(s), raw, pipeline(s), ...,
    raw: each pipeline measurement sits between two raw ones of each baseline, and its ratio is taken
    against their mean. Rates on a shared machine drift by 15-25% over minutes, so a ratio of two
    measurements taken minutes apart says more about the drift than about the pipeline; the paired ratios
    do not, and the median of them is reported (with every measurement printed). Two-worker scaling pairs
    the runs of one round."""
    texts_file = tmp / f"{name}.json"
    texts_file.write_text(json.dumps(texts))

    def raw_once():
        found = {}
        for baseline, flag in BASELINES.items():
            result = _result(_child("raw", {**env, "SPACY_COMPILED_RULER": flag}, "--texts", str(texts_file),
                                    "--steps", ",".join(steps)))
            if result["compiled"] != (flag == "true"):
                raise SystemExit(f"the {baseline} baseline ran with compiled={result['compiled']}")
            found[baseline] = (result["items"] / result["seconds"], result["peak_mib"])
        return found

    raws = [raw_once()]
    rounds = []  # per round: {workers: (rate, peak)}
    for _ in range(repeat):
        measured = {}
        for workers in workers_list:
            run_id = _prepare_run(texts, steps, f"{name}-{workers}w", env, fit_texts)
            ready = tmp / f"ready-{run_id}"
            ready.mkdir()
            with CpuAccounting() as accounting:
                procs = [_child("pipeline", env, "--run", str(run_id), "--workers", str(workers), "--worker",
                                str(w), "--texts", str(texts_file), "--ready", str(ready))
                         for w in range(workers)]
                results = [_result(p) for p in procs]
            began, ended = min(r["began"] for r in results), max(r["ended"] for r in results)
            server, idle = accounting.between(began, ended)
            own = sum(r["cpu"] for r in results)
            backends = sum(r["backend_cpu"] for r in results)
            print(f"  {name} {workers} worker{'s' if workers > 1 else ''}: {ended - began:.2f} s wall; "
                  f"CPU seconds: worker{'s' if workers > 1 else ''} {' + '.join(format(r['cpu'], '.2f') for r in results)}"
                  f", their PostgreSQL backend{'s' if workers > 1 else ''} {backends:.2f}, PostgreSQL's other processes "
                  f"{server:.2f}, idle on the machine {idle:.2f} (of {os.cpu_count()} cores), the rest "
                  f"{os.cpu_count() * (ended - began) - own - backends - server - idle:.2f}", flush=True)
            if workers > 1:
                fetched = sum(r["shared"]["fetched"] for r in results)
                published = sum(r["shared"]["published"] for r in results)
                print(f"  {name} {workers} workers: {published:,} entries published to the run's shared decisions, "
                      f"{fetched:,} fetched by a worker that had not decided them", flush=True)
            wall = max(r["seconds"] for r in results)
            measured[workers] = (len(texts) / wall, max(r["peak_mib"] for r in results))
        rounds.append(measured)
        raws.append(raw_once())

    def around(r, baseline):
        return (raws[r][baseline][0] + raws[r + 1][baseline][0]) / 2

    for r, measured in enumerate(rounds):
        print(f"  {name} round {r + 1}: raw nlp.pipe, spaCy {raws[r]['spacy'][0]:,.0f} and "
              f"{raws[r + 1]['spacy'][0]:,.0f}/s, compiled ruler {raws[r]['compiled'][0]:,.0f} and "
              f"{raws[r + 1]['compiled'][0]:,.0f}/s; " + "; ".join(
                  f"{w} worker{'s' if w > 1 else ''} {rate:,.0f}/s ({rate / around(r, 'spacy'):.2f} of spaCy, "
                  f"{rate / around(r, 'compiled'):.2f} of compiled)" for w, (rate, _) in measured.items()),
              flush=True)
    out = {"raw": {b: statistics.median([raw[b][0] for raw in raws]) for b in BASELINES},
           "raw_peak": max(raw[b][1] for raw in raws for b in BASELINES), "rows": []}
    for workers in workers_list:
        ratios = {b: statistics.median([m[workers][0] / around(r, b) for r, m in enumerate(rounds)]) for b in BASELINES}
        out["rows"].append((workers, statistics.median([m[workers][0] for m in rounds]), ratios,
                            max(m[workers][1] for m in rounds)))
    if len(workers_list) > 1:
        out["scaling"] = statistics.median([m[workers_list[-1]][0] / m[workers_list[0]][0] for m in rounds])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--captions", type=int, default=20_000)
    parser.add_argument("--comments", type=int, default=100_000)
    parser.add_argument("--only", choices=["cc", "cc-distinct", "cc-preset", "ava"],
                        help="run one family of scenarios (cc-distinct: cc's distinct texts with one and two workers)")
    parser.add_argument("--redis-url", default=None,
                        help="Redis database for the workers, as in production: the workers of a run share the "
                             "decisions of repeated texts through it; without it each keeps its own (default: "
                             "with REDIS_URL set, an empty database on its server, claimed for this run and "
                             "emptied afterwards; without, no Redis)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds of pipeline runs, each between two baseline runs; medians are reported")
    add_scratch_arguments(parser, "filters")
    args = parser.parse_args()
    base = postgres_base_url()
    if base is None:
        return 2
    claimed = args.redis_url is None and bool(os.environ.get("REDIS_URL"))
    if claimed:
        args.redis_url = claim_redis_db(os.environ["REDIS_URL"])
    try:
        return _run(args, base)
    finally:
        if claimed:
            release_redis_db(args.redis_url)


def _run(args, base: str) -> int:
    import tempfile

    lines = []
    scaling = {}
    with scratch_database(base, args.db_name, keep=args.keep_db) as db, tempfile.TemporaryDirectory() as tmp:
        os.environ.update({"DATABASE_URL": db.url, "LOG_LEVEL": "WARNING"})
        os.environ.pop("REDIS_URL", None)
        # Workers run as in production: with DEBUG on, Django would also keep every query and render it with
        # its parameters (the chunk's id arrays included) for the debug log.
        env = {**db.env, "DEBUG": "false"}
        if args.redis_url:  # the runs are started here (start() publishes the repeated texts) and run there
            os.environ["REDIS_URL"] = env["REDIS_URL"] = args.redis_url
            print(f"Redis {args.redis_url}: the workers of a run share the decisions of its repeated texts")
        else:
            print("no Redis (--redis-url or REDIS_URL): each worker keeps the decisions it made to itself")
        tmp = Path(tmp)
        if args.only in (None, "cc", "cc-distinct"):
            for name, dup in (("cc-distinct", 0.0), ("cc-dup30", 0.3))[:1 if args.only == "cc-distinct" else 2]:
                texts = make_captions(args.captions, dup)
                workers = (1, 2) if dup == 0.0 else (1,)
                found = scenario(name, texts, CC_TEXT_STEPS, env, tmp, workers, repeat=args.repeat)
                for w, rate, ratios, peak in found["rows"]:
                    lines.append((f"{name} ({w} worker{'s' if w > 1 else ''})", len(texts), rate, found["raw"],
                                  ratios, peak, found["raw_peak"]))
                if "scaling" in found:
                    scaling["cc"] = found["scaling"]
        if args.only in (None, "cc-preset"):
            texts = make_captions(args.captions, 0.3)
            found = scenario("cc-preset-dup30", texts, CC_PRESET_TEXT_STEPS, env, tmp, (1,), repeat=args.repeat)
            for w, rate, ratios, peak in found["rows"]:
                lines.append(("cc preset text path, dup30 (1 worker)", len(texts), rate, found["raw"], ratios,
                              peak, found["raw_peak"]))
        if args.only in (None, "ava"):
            comments = make_comments(args.comments)
            fit = make_comments(5000, seed=99)
            found = scenario("ava", comments, AVA_STEPS, env, tmp, (1, 2), fit_texts=fit, repeat=args.repeat)
            for w, rate, ratios, peak in found["rows"]:
                lines.append((f"ava informativeness ({w} worker{'s' if w > 1 else ''})", len(comments), rate,
                              found["raw"], ratios, peak, found["raw_peak"]))
            scaling["ava"] = found["scaling"]
        from django.db import connections

        connections.close_all()  # let the scratch database be dropped
    medians = " (medians of the rounds; ratio: the median of the paired ratios)" if args.repeat > 1 else ""
    print(f"\n{'scenario':<36} {'items':>7} {'pipeline/s':>11} {'spaCy/s':>9} {'ratio':>6} {'compiled/s':>11} "
          f"{'ratio':>6} {'peak RSS pipeline':>18} {'peak RSS nlp.pipe':>18}{medians}")
    for label, n, rate, raw, ratios, peak, raw_peak in lines:
        print(f"{label:<36} {n:>7} {rate:>11,.0f} {raw['spacy']:>9,.0f} {ratios['spacy']:>6.2f} "
              f"{raw['compiled']:>11,.0f} {ratios['compiled']:>6.2f} {peak:>14.0f} MiB {raw_peak:>14.0f} MiB")
    print("spaCy/s: raw nlp.pipe with the components as spaCy ships them (the targets' baseline); compiled/s: the "
          "same with the\ncompiled attribute-ruler matcher the workers use (the ratio to it: the pipeline's cost "
          "besides parsing)")
    for family, value in scaling.items():
        print(f"{family}: two workers / one worker = {value:.2f}x (target >= 1.7)")
    print("targets (ratios to spaCy): cc-distinct >= 0.85; cc-dup30 >= 1.3; ava >= 0.85 "
          "(the cc preset text path has no target of its own)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        kind = sys.argv[2]
        p = argparse.ArgumentParser()
        p.add_argument("--texts")
        p.add_argument("--steps")
        p.add_argument("--run", type=int)
        p.add_argument("--workers", type=int, default=1)
        p.add_argument("--worker", type=int, default=0)
        p.add_argument("--ready", help="a folder where the workers of a run meet before their clocks start")
        a = p.parse_args(sys.argv[3:])
        {"raw": child_raw, "pipeline": child_pipeline}[kind](a)
    else:
        sys.exit(main())
