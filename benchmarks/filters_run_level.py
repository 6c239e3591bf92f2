"""The run-level scenario of benchmarks/filters.py: the finalising worker's peak RSS at growing run sizes.

For each size S (captions), in one scratch database of its own (``<db-name>_<S>``, created and dropped here):

1. a child process bulk-inserts a collection of S/4 images with four alt-text captions each (INSERT ... SELECT
   over generate_series: seconds per million rows); every 25th image is an exact copy (same sha256) of an
   image in an older collection. The captions come from ~3,000 distinct texts of photo-comment vocabulary,
   so that LDA has words and parsing the distinct texts stays cheap;
2. it creates a run of the conceptual-captions run-level path, ``image_format`` (per chunk, as the preset's
   image steps before the duplicate filters), ``exact_duplicate`` (run level, per image), ``near_duplicate``
   (run level, the whole run's hashes at once; every 40th image is a copy of the one before), ``hypernymize``
   (per chunk), ``rare_entity_types`` (run level, min_share 0.01) and ``lda_topics`` (run level,
   K = --lda-topics), and starts it (chunks cut by the executor). The chunks are not run (hypernymizing a
   million captions, parser and NER, takes some 25 CPU-minutes, an hour or more of wall time on this shared
   machine): their decisions (image_format: keep; hypernymize: keep,
   with one or two entity types per caption, a rare type in 0.5% of them) are written with INSERT ... SELECT
   and the table ANALYZEd (as autovacuum would have, a run's chunks taking minutes), and each
   chunk is marked done with the counts a chunk saves. What finalise then reads is what it reads after real
   chunks;
3. a fresh child process runs ``executor.finish(run)`` (the run-level steps over the survivors, the funnel) and
   reports its peak RSS (VmHWM from /proc/self/status) and CPU seconds, and its PostgreSQL backend's CPU; the
   parent also prints getrusage(RUSAGE_CHILDREN).ru_maxrss (the largest child so far: a check on VmHWM).
"""
from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scratch_db import scratch_database  # noqa: E402

CHILD_SETUP = """
import json, os, resource, sys, time
sys.path.insert(0, {root!r})
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
"""

ADJECTIVES = ["rusty", "golden", "quiet", "crowded", "wooden", "snowy", "sunny", "misty", "red", "ancient",
              "narrow", "bright", "dark", "wet", "tall", "small"]
NOUNS = ["tractor", "field", "harbour", "bridge", "market", "church", "lighthouse", "forest", "street", "boat",
         "mountain", "garden", "station", "castle", "beach", "river", "door", "window", "tower", "village"]
PLACES = ["at dawn", "in the rain", "near the coast", "after the storm", "in autumn", "under a blue sky",
          "at night", "in winter", "by the lake", ""]
TYPES = ["person", "city", "country", "organisation", "building", "river", "artist", "actor", "politician",
         "athlete"]

BUILD = CHILD_SETUP + """
from django.db import connection
from curation.models import Collection, FilterRun, Pipeline, RunChunk
from curation.pipeline import executor
from curation.services import run_create

size, lda_topics = {size}, {lda_topics}
adjectives, nouns, places, types = {adjectives!r}, {nouns!r}, {places!r}, {types!r}
images = size // 4
collection = Collection.objects.create(name=f"run-level bench {{size}}")
started = time.perf_counter()
with connection.cursor() as cursor:
    # Every 25th image's file is already in an older collection (inserted first: a lower id), which
    # exact_duplicate (across_collections) counts as the first copy: that image is dropped.
    older = Collection.objects.create(name=f"run-level bench {{size}}: older files")
    for owner, where in ((older.pk, "WHERE g %% 25 = 0"), (collection.pk, "")):
        cursor.execute(
            "INSERT INTO curation_image (collection_id, file, thumbnail, status, sha256, phash, width, height, format, "
            "source_url, external_id, metadata, license, credit, error, created_at) "
            "SELECT %s, '', '', 'ready', encode(sha256(convert_to('file-' || g, 'UTF8')), 'hex'), "
            # The 64-bit pHash (as an earlier step caches it): every 40th image a re-encoded copy of the one
            # before (the last hex digit changed: at most 4 bits), which near_duplicate drops.
            "CASE WHEN g %% 40 = 0 THEN substr(md5('p' || (g - 1)), 1, 15) || 'f' ELSE substr(md5('p' || g), 1, 16) END, "
            "640, 480, "
            "'JPEG', '', 'img-' || g, '{{}}'::jsonb, '', '', '', now() FROM generate_series(1, %s) g " + where,
            [owner, images])
    # Four captions per image, from adjective x noun x place combinations (~3,000 distinct texts).
    cursor.execute(
        "WITH t AS (SELECT i.id AS image_id, k, abs(hashtext(i.id || '.' || k)) %% 3200 AS v FROM curation_image i "
        "CROSS JOIN generate_series(1, 4) k WHERE i.collection_id = %s), "
        "w AS (SELECT image_id, k, rtrim('A ' || (%s::text[])[1 + v %% 16] || ' ' || (%s::text[])[1 + (v / 16) %% 20] "
        "|| ' ' || (%s::text[])[1 + (v / 320) %% 10]) || '.' AS text FROM t) "
        "INSERT INTO curation_caption (image_id, text, text_hash, language, origin, source, external_id, metadata, "
        "created_at) SELECT image_id, text, encode(sha256(convert_to(text || '#' || k, 'UTF8')), 'hex'), 'en', "
        "'alt_text', 'bench-' || k, '', '{{}}'::jsonb, now() FROM w",
        [collection.pk, adjectives, nouns, places])
    cursor.execute("ANALYZE curation_image; ANALYZE curation_caption")
inserted = time.perf_counter() - started
steps = [{{"filter": "image_format"}}, {{"filter": "exact_duplicate"}}, {{"filter": "near_duplicate"}},
         {{"filter": "hypernymize"}},
         {{"filter": "rare_entity_types", "params": {{"min_share": 0.01}}}},
         {{"filter": "lda_topics", "params": {{"n_topics": lda_topics}}}}]
pipeline = Pipeline.objects.create(name=f"run-level bench {{size}}", steps=steps)
run = run_create(collection=collection, pipeline=pipeline, enqueue=False)
executor.start(run.pk, enqueue=lambda *a: None)
run.refresh_from_db()
position = next(i for i, s in enumerate(run.snapshot) if s["filter"] == "hypernymize")
image_step = next(i for i, s in enumerate(run.snapshot) if s["filter"] == "image_format")
with connection.cursor() as cursor:
    # What the chunks would have written. image_format (a chunk step on images, as in the preset, before the
    # duplicate filters): a keep per image. hypernymize: a keep per caption with its entity types (one or two
    # common types; a rare one in 0.5% of the captions, which rare_entity_types drops).
    cursor.execute(
        "INSERT INTO curation_filterdecision (run_id, image_id, caption_id, step, filter_name, outcome, score, reason, "
        "details, text_before, text_after, override) SELECT %s, i.id, NULL, %s, 'image_format', 'keep', NULL, '', "
        "'{{}}'::jsonb, '', '', '' FROM curation_image i WHERE i.collection_id = %s", [run.pk, image_step, collection.pk])
    cursor.execute(
        "INSERT INTO curation_filterdecision (run_id, image_id, caption_id, step, filter_name, outcome, score, reason, "
        "details, text_before, text_after, override) SELECT %s, c.image_id, c.id, %s, 'hypernymize', 'keep', NULL, "
        "'hypernymized', jsonb_build_object('entity_types', CASE WHEN c.id %% 199 = 0 THEN jsonb_build_array('rare-' "
        "|| c.id) WHEN c.id %% 3 = 0 THEN jsonb_build_array((%s::text[])[1 + c.id %% 10], (%s::text[])[1 + (c.id / 10) "
        "%% 10]) ELSE jsonb_build_array((%s::text[])[1 + c.id %% 10]) END), c.text, '', '' FROM curation_caption c "
        "JOIN curation_image i ON i.id = c.image_id WHERE i.collection_id = %s",
        [run.pk, position, types, types, types, collection.pk])
    cursor.execute(
        "UPDATE curation_runchunk rc SET status = 'done', attempts = 1, seconds = 0, counts = jsonb_build_object("
        "%s, jsonb_build_object('keep', jsonb_array_length(rc.item_ids)), "
        "%s, jsonb_build_object('keep', (SELECT count(*) FROM curation_caption c WHERE c.image_id IN "
        "(SELECT (jsonb_array_elements_text(rc.item_ids))::bigint)))) WHERE rc.run_id = %s",
        [str(image_step), str(position), run.pk])
    cursor.execute("ANALYZE curation_filterdecision; ANALYZE curation_runchunk")
FilterRun.objects.filter(pk=run.pk).update(status=FilterRun.Status.FINALISING, chunks_done=run.chunks_total,
                                           items_done=run.items_total)
from curation.models import Caption
captions = Caption.objects.filter(image__collection=collection).count()
print(json.dumps({{"run": run.pk, "captions": captions, "chunks": run.chunks_total,
                   "build_seconds": time.perf_counter() - started, "insert_seconds": inserted}}))
"""  # noqa: S608

FINISH = CHILD_SETUP + """
from curation.models import FilterRun
from curation.pipeline import executor

from django.db import connection
with connection.cursor() as cursor:
    cursor.execute("SELECT pg_backend_pid()")
    backend = cursor.fetchone()[0]

def backend_cpu():
    try:
        fields = open(f"/proc/{{backend}}/stat").read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

before = backend_cpu()
started = resource.getrusage(resource.RUSAGE_SELF)
wall = time.perf_counter()
executor.finish({run})
wall = time.perf_counter() - wall
ended = resource.getrusage(resource.RUSAGE_SELF)
run = FilterRun.objects.get(pk={run})
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({{"status": run.status, "error": run.error, "peak_kib": peak, "wall": wall,
                   "backend_cpu": backend_cpu() - before,
                   "cpu": ended.ru_utime + ended.ru_stime - started.ru_utime - started.ru_stime,
                   "funnel": [(r["filter"], r["entered"], r["dropped"]) for r in run.funnel or []]}}))
"""


def _child(code: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"a run-level benchmark process failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_level_scenario(base: str, db_prefix: str, sizes: list[int], lda_topics: int, *, keep: bool = False) -> list[dict]:
    """Build and finalise a run per size, each in its own scratch database; returns a row per size."""
    rows = []
    for size in sizes:
        with scratch_database(base, f"{db_prefix}_{size}"[:63], keep=keep) as db:
            built = _child(BUILD.format(root=str(ROOT), size=size, lda_topics=lda_topics, adjectives=ADJECTIVES,
                                        nouns=NOUNS, places=PLACES, types=TYPES), db.env)
            print(f"  run-level {built['captions']:,} captions: built in {built['build_seconds']:.1f} s "
                  f"(rows inserted in {built['insert_seconds']:.1f} s), {built['chunks']} chunks; finalising...",
                  flush=True)
            done = _child(FINISH.format(root=str(ROOT), run=built["run"]), db.env)
            children_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB, the largest child so far
            if done["status"] != "done":
                raise SystemExit(f"the {size:,}-caption run ended {done['status']}: {done['error']}")
            row = {"captions": built["captions"], "peak_mib": done["peak_kib"] / 1024, "cpu": done["cpu"],
                   "backend_cpu": done["backend_cpu"],
                   "wall": done["wall"], "children_peak_mib": children_peak / 1024, "funnel": done["funnel"]}
            print(f"  run-level {row['captions']:,} captions: peak RSS {row['peak_mib']:.0f} MiB, {row['cpu']:.1f} CPU s (its PostgreSQL "
                  f"backend {row['backend_cpu']:.1f}), {row['wall']:.1f} s wall (RUSAGE_CHILDREN "
                  f"max RSS so far {row['children_peak_mib']:.0f} MiB); funnel (step, entered, dropped): {row['funnel']}", flush=True)
            rows.append(row)
    return rows


def print_run_level_table(rows: list[dict]) -> None:
    print("\nRun-level steps (exact_duplicate, near_duplicate, rare_entity_types, lda_topics) and the funnel, in the "
          "finalising process")
    print(f"{'captions':>10} {'peak RSS (VmHWM)':>17} {'x first':>8} {'CPU s':>8} {'CPU s / 1k':>10} {'backend CPU s':>13} {'wall s':>8}")
    first = rows[0]
    for r in rows:
        print(f"{r['captions']:>10,} {r['peak_mib']:>13.0f} MiB {r['peak_mib'] / first['peak_mib']:>8.2f} {r['cpu']:>8.1f} "
              f"{1000 * r['cpu'] / r['captions']:>10.3f} "
              f"{r['backend_cpu']:>13.1f} {r['wall']:>8.1f}")
    if len(rows) > 1:
        ratio = rows[-1]["peak_mib"] / first["peak_mib"]
        print(f"peak RSS at {rows[-1]['captions']:,} / at {first['captions']:,} captions: {ratio:.2f} (target <= 1.2 "
              f"between 100k and 1M: {'ok' if ratio <= 1.2 else 'MISSED'})")
