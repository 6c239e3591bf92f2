"""Ingest benchmark: the Conceptual-Captions TSV importer against a raw PostgreSQL COPY.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python benchmarks/ingest.py

Generates TSV files (20,000 and 200,000 rows by default; no downloads), creates a scratch
database, and for each size:
  * imports the file with the real importer (curation.ingest.runner.import_run, as the Celery
    task runs it) in a child process, which reports its rows/s and its peak RSS;
  * loads the same file with a raw ``COPY ... FROM STDIN`` into a plain two-column table (the
    baseline), in this process.
Prints rows/s for both, the ratio (target >= 0.5) and the importer's peak RSS at both sizes
(target: it does not grow with the file).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scratch_db import add_scratch_arguments, postgres_base_url, scratch_database  # noqa: E402

WORDS = ("a dog runs on the beach with a red ball near the water at sunset while people watch "
         "actor attends the premiere of the film in the city old building with tall windows "
         "stock photo of a woman holding an umbrella in the rain on a busy street").split()


def make_tsv(path: Path, rows: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(rows):
            caption = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 16)))
            fh.write(f"{caption.capitalize()}.\thttps://images.example.org/{i // 2}/{i}.jpg\n")


def child(tsv: str) -> None:
    """Run in a subprocess: import ``tsv`` into a fresh collection, print JSON figures."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from curation.ingest.runner import import_run
    from curation.models import Collection, ImportJob

    collection = Collection.objects.create(name=f"bench-{Path(tsv).stem}-{time.time_ns()}")
    job = ImportJob.objects.create(collection=collection, kind=ImportJob.Kind.TSV, source_path=tsv,
                                   source_name=Path(tsv).name, options={"download": False})
    start = time.perf_counter()
    job = import_run(job.pk)
    elapsed = time.perf_counter() - start
    # VmHWM, not ru_maxrss: the latter keeps the forked parent's size across exec.
    peak_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print(json.dumps({"status": job.status, "rows": job.rows_read, "imported": job.rows_imported,
                      "seconds": elapsed, "peak_rss_mib": peak_kib / 1024}))


def copy_baseline(dsn: str, tsv: Path) -> float:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS bench_copy")
        conn.execute("CREATE TABLE bench_copy (caption text, url text)")
        start = time.perf_counter()
        with conn.cursor() as cur, open(tsv, "rb") as fh:
            with cur.copy("COPY bench_copy (caption, url) FROM STDIN") as copy:
                while data := fh.read(1 << 20):
                    copy.write(data)
        elapsed = time.perf_counter() - start
        conn.execute("DROP TABLE bench_copy")
    return elapsed


def copy_into_platform_tables(dsn: str, tsv: Path) -> float:
    """The fastest any importer could land these rows in the platform's own tables: raw COPY of
    the distinct URLs into curation_image, read back their ids, raw COPY of the captions into
    curation_caption. No validation, no deduplication against existing rows, no report."""
    import hashlib

    import psycopg

    with psycopg.connect(dsn) as conn:
        collection = conn.execute(
            "INSERT INTO curation_collection (name, description, source_kind, language, created_at) "
            "VALUES (%s, '', 'alt_text', 'en', now()) RETURNING id", (f"baseline-{time.time_ns()}",)
        ).fetchone()[0]
        conn.commit()
        start = time.perf_counter()
        rows = []
        with open(tsv, encoding="utf-8") as fh:
            for line in fh:
                caption, url = line.rstrip("\n").split("\t")
                rows.append((caption, url))
        urls = list(dict.fromkeys(url for _, url in rows))
        with conn.cursor() as cur:
            with cur.copy("COPY curation_image (collection_id, file, thumbnail, status, phash, format, source_url, "
                          "external_id, metadata, license, credit, error, created_at) FROM STDIN") as copy:
                for url in urls:
                    copy.write_row((collection, "", "", "pending", "", "", url, "", "{}", "", "", "", "now"))
            ids = dict(cur.execute("SELECT source_url, id FROM curation_image WHERE collection_id = %s",
                                   (collection,)).fetchall())
            with cur.copy("COPY curation_caption (image_id, text, text_hash, language, origin, source, external_id, "
                          "metadata, created_at) FROM STDIN") as copy:
                for caption, url in rows:
                    copy.write_row((ids[url], caption, hashlib.sha256(caption.encode()).hexdigest(), "en",
                                    "alt_text", "baseline", "", "{}", "now"))
        conn.commit()
        return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20000,200000", help="comma-separated row counts")
    add_scratch_arguments(parser, "ingest")
    args = parser.parse_args()
    base = postgres_base_url()
    if base is None:
        return 2
    results = []
    with scratch_database(base, args.db_name, keep=args.keep_db) as db, \
            tempfile.TemporaryDirectory() as tmp:
        for rows in [int(s) for s in args.sizes.split(",")]:
            tsv = Path(tmp) / f"cc-{rows}.tsv"
            make_tsv(tsv, rows)
            copy_s = copy_baseline(db.dsn, tsv)
            table_s = copy_into_platform_tables(db.dsn, tsv)
            out = subprocess.run([sys.executable, __file__, "--child", str(tsv)], cwd=ROOT, env=db.env,
                                 check=True, capture_output=True, text=True).stdout
            figures = json.loads(out.strip().splitlines()[-1])
            assert figures["status"] == "done" and figures["imported"] == rows, figures
            results.append((rows, rows / figures["seconds"], rows / table_s, rows / copy_s, figures["peak_rss_mib"]))
    print("baseline A: raw COPY into the platform's tables (images + captions, their indexes and keys)")
    print("baseline B: raw COPY into a bare two-column table (no indexes, no keys)")
    print(f"{'rows':>9} {'importer rows/s':>16} {'A rows/s':>10} {'ratio A':>8} {'B rows/s':>10} {'ratio B':>8} {'importer peak RSS':>18}")
    for rows, imp, table, copy, rss in results:
        print(f"{rows:>9} {imp:>16,.0f} {table:>10,.0f} {imp / table:>8.2f} {copy:>10,.0f} {imp / copy:>8.2f} {rss:>14.1f} MiB")
    if len(results) >= 2:
        growth = results[-1][4] / results[0][4]
        print(f"peak RSS {results[-1][0]} rows / {results[0][0]} rows: {growth:.2f}x (target: no growth, ~1.0)")
    final = results[-1]
    print(f"target ratio A >= 0.50: {'PASS' if final[1] / final[2] >= 0.5 else 'FAIL'} ({final[1] / final[2]:.2f})")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        sys.exit(main())
