"""Run-level steps at scale: the finalising worker's peak RSS and CPU time at growing run sizes.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python benchmarks/run_level.py \
        --sizes 100000 1000000

For each size, a scratch collection of images with four comments each (every tenth image with none, every
fiftieth a copy of an older collection's file) is written with INSERT ... SELECT, a run of ``--steps`` is
started and its chunks are done (the pipeline has no chunk-level step: a chunk only loads its items), and
then a fresh child process finishes the run: the run-level steps over the survivors, the funnel. That
child prints its peak RSS (VmHWM) and CPU seconds; the parent prints them per size, the ratio of the
largest size's peak to the smallest's (target: at most 1.2 between 100k and 1M captions for steps the
executor decides in batches, see curation/pipeline/executor/runlevel.py), and CPU-seconds per 1,000 captions.

Steps whose ``decide_run`` needs every row at once (rare_entity_types, lda_topics, near_duplicate, ...) can be
given with ``--steps`` to see how they grow.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scratch_db import add_scratch_arguments, postgres_base_url, scratch_database  # noqa: E402

CHILD_SETUP = """
import os, resource, sys, time, json
sys.path.insert(0, {root!r})
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
"""

BUILD = CHILD_SETUP + """
from django.db import connection
from curation.models import Caption, Collection, Image, Pipeline, RunChunk
from curation.pipeline import executor
from curation.pipeline.executor import runs
from curation.services import run_create

size, steps = {size}, {steps!r}
images = size // 4 * 10 // 9
older = Collection.objects.get_or_create(name="older files")[0]
collection = Collection.objects.create(name=f"bench {{size}}")
with connection.cursor() as cursor:
    columns = ("collection_id, file, thumbnail, status, sha256, phash, width, height, format, source_url, "
               "external_id, metadata, license, credit, error, created_at")
    sha = "md5(%s || '-' || g) || md5('x' || g)"
    # The older collection's copies first (lower ids): every fiftieth new image is a copy of one of them.
    cursor.execute(f"INSERT INTO curation_image ({{columns}}) SELECT %s, '', '', 'ready', {{sha}}, '', 640, 480, 'JPEG', "
                   "'', 'old-' || %s || '-' || g, '{{}}'::jsonb, '', '', '', now() FROM generate_series(1, %s) g "
                   "WHERE g %% 50 = 0", [older.pk, size, size, images])
    cursor.execute(f"INSERT INTO curation_image ({{columns}}) SELECT %s, '', '', 'ready', {{sha}}, '', 640, 480, 'JPEG', "
                   "'', 'b-' || g, '{{}}'::jsonb, '', '', '', now() FROM generate_series(1, %s) g",
                   [collection.pk, size, images])
    cursor.execute("INSERT INTO curation_caption (image_id, text, text_hash, language, origin, source, external_id, "
                   "metadata, created_at) SELECT i.id, 'A gull over the harbour wall, frame ' || i.id || '.' || k, "
                   "md5(i.id || '.' || k), 'en', 'web_comment', '', '', '{{}}'::jsonb, now() FROM curation_image i "
                   "CROSS JOIN generate_series(1, 4) k WHERE i.collection_id = %s "
                   "AND split_part(i.external_id, '-', 2)::int %% 10 <> 3", [collection.pk])
    cursor.execute("ANALYZE")
pipeline = Pipeline.objects.create(name=f"bench {{size}}", steps=[{{"filter": s}} for s in steps])
run = run_create(collection=collection, pipeline=pipeline, enqueue=False)
runs.finish = lambda run_id: None  # the chunks only: finishing is measured in its own process
executor.start(run.pk, enqueue=lambda *a: None)
for index in RunChunk.objects.filter(run=run).values_list("index", flat=True):
    executor.run_chunk(run.pk, index)
print(json.dumps({{"run": run.pk, "captions": Caption.objects.filter(image__collection=collection).count()}}))
"""  # noqa: S608

FINISH = CHILD_SETUP + """
from curation.models import FilterRun
from curation.pipeline import executor

started = time.process_time()
wall = time.perf_counter()
executor.finish({run})
cpu, wall = time.process_time() - started, time.perf_counter() - wall
run = FilterRun.objects.get(pk={run})
peak = [line for line in open("/proc/self/status") if line.startswith("VmHWM")][0].split()[1]
print(json.dumps({{"status": run.status, "error": run.error, "peak_kb": int(peak), "cpu": cpu, "wall": wall,
                   "funnel": [(r["filter"], r["entered"], r["dropped"]) for r in run.funnel]}}))
"""


def child(code: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"a benchmark process failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="captions per run")
    parser.add_argument("--steps", nargs="+", default=["exact_duplicate", "images_without_comments"])
    add_scratch_arguments(parser, "run_level")
    args = parser.parse_args()
    base = postgres_base_url()
    if base is None:
        return 2
    results = []
    with scratch_database(base, args.db_name, keep=args.keep_db) as db:
        env = {**db.env, "DEBUG": "0"}  # as a worker runs: with DEBUG, Django keeps the last 9,000 statements
        for size in args.sizes:
            built = child(BUILD.format(root=str(ROOT), size=size, steps=args.steps), env)
            done = child(FINISH.format(root=str(ROOT), run=built["run"]), env)
            results.append((built["captions"], done))
            print(f"{built['captions']:>9,} captions  peak RSS {done['peak_kb'] / 1024:7.1f} MB  "
                  f"CPU {done['cpu']:6.1f} s ({1000 * done['cpu'] / built['captions']:.3f} s per 1,000 captions)  "
                  f"wall {done['wall']:6.1f} s  {done['status']}  {done['funnel']}", flush=True)
    if len(results) > 1:
        (small, first), (large, last) = results[0], results[-1]
        print(f"peak RSS at {large:,} / at {small:,} captions: {last['peak_kb'] / first['peak_kb']:.2f} (target <= 1.2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
