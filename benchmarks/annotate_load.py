#!/usr/bin/env python
"""Load on the annotator's hot path: fetch next task, submit a vote, under gunicorn on PostgreSQL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
    .venv/bin/python benchmarks/annotate_load.py [--duration 30] [--levels 1,8,32] [--tasks 50000]

What it does, all in one run:

1. creates a scratch PostgreSQL database (benchmarks/scratch_db.py; ``--db-name``, default
   ``captionlab_bench_annotate_load_<pid>``) and migrates it;
2. fills it: a collection of ``--tasks`` images with one caption each, a running GOOD/BAD quality
   campaign with one task per caption and ``--votes-per-item`` votes each, and ``max(levels)``
   annotators, members of the campaign, each with an API token;
3. starts ``gunicorn captionlab.wsgi`` on 127.0.0.1 with captionlab/gunicorn.conf.py (the
   production profile, DEBUG off, persistent database connections, Redis as cache and broker on a
   database of its own so no other Celery worker picks the aggregation messages up: ``--redis-url``,
   default an empty database of the local server claimed for this run);
4. for each level of concurrency, drives the annotator loop (POST .../next/, then POST
   .../tasks/<id>/vote/) from N virtual annotators for ``--duration`` seconds. The load generator
   is a separate process running one asyncio loop over raw keep-alive HTTP connections, so it
   costs little of the 2 cores it shares with gunicorn and PostgreSQL. Requests in flight when the
   time is up are finished, so every vote the server stored has been acknowledged or not;
5. counts the stored votes in PostgreSQL and compares them with the acknowledged ones (201
   answers, by vote id), and prints votes/s, p50/p95/p99 latency of fetch, submit and the pair,
   errors (any other answer or a broken connection), and the targets: at 32 workers at least 200
   votes/s, zero errors, stored = acknowledged; with 1 worker p95(fetch + submit) under 20 ms.

Every process it starts is killed on exit, the scratch database is dropped (``--keep-db``
keeps it) and a claimed Redis database is emptied; nothing this run did not create is dropped. The gunicorn worker class and count come from captionlab/gunicorn.conf.py; override
them with --gunicorn-workers / --gunicorn-threads / --worker-class to compare.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.scratch_db import (add_scratch_arguments, claim_redis_db, postgres_base_url,  # noqa: E402
                                   release_redis_db, scratch_database)
from benchmarks.web_memory import _kill_all, _on_signal, free_port, start, wait_for_port  # noqa: E402

TARGET_VOTES_PER_S = 200.0
TARGET_P95_MS = 20.0


# --- 1. Data (run in a child process with the scratch database's settings) -----------------------

def setup_data(n_tasks: int, n_users: int, votes_per_item: int) -> dict:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "captionlab.settings")
    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from django.contrib.auth.models import Group
    from django.db import transaction
    from rest_framework.authtoken.models import Token

    from annotation.models import Campaign, Membership, Task, Worker
    from captionlab import roles
    from curation.models import Caption, Collection, Image, text_hash

    texts = ["A big fluffy dog running on the beach at sunset.", "Trees in the snow on a cold winter morning.",
             "the rusty tractor against the golden wheat field", "two children play in the park near a fountain"]
    with transaction.atomic():
        collection = Collection.objects.create(name="annotate load", source_kind=Collection.SourceKind.WEB_ALT_TEXT)
        Image.objects.bulk_create(
            [Image(collection=collection, sha256=f"{i:064x}", width=640, height=480, format="JPEG",
                   external_id=f"load-{i}", status=Image.Status.READY) for i in range(n_tasks)], batch_size=5000)
        image_ids = list(Image.objects.filter(collection=collection).order_by("pk").values_list("pk", flat=True))
        captions = []
        for i, image_id in enumerate(image_ids):
            text = f"{texts[i % len(texts)]} ({i})"
            captions.append(Caption(image_id=image_id, text=text, text_hash=text_hash(text),
                                    origin=Caption.Origin.ALT_TEXT, source="load"))
        Caption.objects.bulk_create(captions, batch_size=5000)
        caption_ids = list(Caption.objects.filter(image__collection=collection).order_by("pk")
                           .values_list("pk", "image_id"))
        campaign = Campaign.objects.create(name="annotate load", kind="quality", collection=collection,
                                           status=Campaign.Status.RUNNING, votes_per_item=votes_per_item,
                                           selection={"collection": collection.pk})
        Task.objects.bulk_create(
            [Task(campaign=campaign, image_id=image_id, caption_id=caption_id, votes_required=votes_per_item,
                  position=i, priority=float(i)) for i, (caption_id, image_id) in enumerate(caption_ids, 1)],
            batch_size=5000)
        group, _ = Group.objects.get_or_create(name=roles.ANNOTATOR)
        password = make_password(secrets.token_urlsafe(16))  # one hash for all: hashing is slow
        User = get_user_model()
        users = User.objects.bulk_create([User(username=f"load{i}", password=password) for i in range(n_users)])
        User.groups.through.objects.bulk_create([User.groups.through(user_id=u.pk, group_id=group.pk) for u in users])
        workers = Worker.objects.bulk_create([Worker(user=u) for u in users])
        Membership.objects.bulk_create([Membership(campaign=campaign, worker=w) for w in workers])
        tokens = [Token.objects.create(user=u).key for u in users]
    # The debounced aggregation trigger: one cache.add on Redis per stored vote.
    from annotation.tasks import schedule_aggregation

    schedule_aggregation(campaign.pk)  # the first one queues; the rest are debounced
    t0 = time.perf_counter()
    for _ in range(1000):
        schedule_aggregation(campaign.pk)
    debounce_us = (time.perf_counter() - t0) * 1000  # per call, in microseconds (1000 calls)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return {"campaign": campaign.pk, "tokens": tokens, "debounce_us": debounce_us}


# --- 2. The load generator (a separate process: one asyncio loop, raw HTTP/1.1) ------------------

class Conn:
    def __init__(self, port: int):
        self.port = port
        self.reader = self.writer = None

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    def close(self):
        if self.writer is not None:
            self.writer.close()
            self.reader = self.writer = None

    async def post(self, path: str, token: str, body: bytes = b"") -> tuple[int, bytes]:
        if self.writer is None:
            await self.open()
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token {token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        self.writer.write(head + body)
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("connection closed by the server")
        status = int(status_line.split()[1])
        length, close = 0, False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection" and value.strip().lower() == "close":
                close = True
        data = await self.reader.readexactly(length) if length else b""
        if close:  # a sync gunicorn worker closes after each answer
            self.close()
        return status, data


async def _annotator(port, campaign, token, deadline, out):
    conn = Conn(port)
    next_path = f"/api/campaigns/{campaign}/next/"
    vote_body = json.dumps({"value": "good", "seconds": 1.0}).encode()
    try:
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            try:
                status, data = await conn.post(next_path, token)
            except (ConnectionError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
                out["errors"].append(f"fetch: {exc!r}")
                conn.close()
                continue
            t1 = time.perf_counter()
            if status != 200:
                out["errors"].append(f"fetch: HTTP {status} {data[:200]!r}")
                continue
            body = json.loads(data)
            if body["task"] is None:
                out["finished"] += 1
                return
            out["fetch"].append(t1 - t0)
            task_id = body["task"]["id"]
            try:
                status, data = await conn.post(f"/api/campaigns/{campaign}/tasks/{task_id}/vote/", token, vote_body)
            except (ConnectionError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
                out["errors"].append(f"vote: {exc!r}")
                conn.close()
                continue
            t2 = time.perf_counter()
            if status != 201:
                out["errors"].append(f"vote: HTTP {status} {data[:200]!r}")
                continue
            out["submit"].append(t2 - t1)
            out["pair"].append(t2 - t0)
            out["acked"].append(json.loads(data)["vote"])
    finally:
        conn.close()


async def _drive(port, campaign, tokens, duration):
    out = {"fetch": [], "submit": [], "pair": [], "acked": [], "errors": [], "finished": 0}
    started = time.monotonic()
    deadline = started + duration
    await asyncio.gather(*[_annotator(port, campaign, t, deadline, out) for t in tokens])
    out["elapsed"] = time.monotonic() - started
    return out


def drive_main(argv) -> int:
    port, campaign, duration = int(argv[0]), int(argv[1]), float(argv[2])
    tokens = json.loads(sys.stdin.read())
    out = asyncio.run(_drive(port, campaign, tokens, duration))
    json.dump(out, sys.stdout)
    return 0


# --- 3. The run ---------------------------------------------------------------------------------

def pct(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    k = min(len(values) - 1, max(0, int(round(q / 100 * (len(values) - 1)))))
    return values[k] * 1000


def stored_votes(dsn: str, campaign: int, ids: list[int]) -> tuple[int, int]:
    """(all votes of the campaign, how many of the acknowledged ids exist)."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        total = conn.execute("SELECT count(*) FROM annotation_vote WHERE campaign_id = %s", [campaign]).fetchone()[0]
        found = conn.execute("SELECT count(*) FROM annotation_vote WHERE id = ANY(%s)", [ids]).fetchone()[0]
        return total, found


def check_counters(dsn: str, campaign: int) -> list[str]:
    """The routing invariants over the whole campaign after the run."""
    import psycopg

    problems = []
    with psycopg.connect(dsn) as conn:
        bad = conn.execute("""
            SELECT count(*) FROM annotation_task t
            LEFT JOIN (SELECT task_id, count(*) n FROM annotation_vote GROUP BY task_id) v ON v.task_id = t.id
            WHERE t.campaign_id = %s AND (t.votes_count <> coalesce(v.n, 0)
                                         OR t.votes_count + t.reserved_count > t.votes_required)""",
                           [campaign]).fetchone()[0]
        if bad:
            problems.append(f"{bad} tasks whose counters disagree with their votes")
        dup = conn.execute("""SELECT count(*) FROM (SELECT task_id, worker_id FROM annotation_vote
                              GROUP BY 1, 2 HAVING count(*) > 1) d""").fetchone()[0]
        if dup:
            problems.append(f"{dup} duplicate (task, worker) votes")
    return problems


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--drive":
        return drive_main(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "--setup":
        n_tasks, n_users, votes = map(int, sys.argv[2:5])
        print(json.dumps(setup_data(n_tasks, n_users, votes)))
        return 0

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=30.0, help="seconds per level (default 30)")
    parser.add_argument("--levels", default="1,8,32", help="concurrent annotators per level (default 1,8,32)")
    parser.add_argument("--tasks", type=int, default=50_000, help="tasks in the campaign (default 50000)")
    parser.add_argument("--votes-per-item", type=int, default=3)
    parser.add_argument("--gunicorn-workers", type=int, help="override captionlab/gunicorn.conf.py")
    parser.add_argument("--gunicorn-threads", type=int, help="override captionlab/gunicorn.conf.py")
    parser.add_argument("--worker-class", help="override captionlab/gunicorn.conf.py (gthread, sync)")
    parser.add_argument("--redis-url", default=os.environ.get("ANNOTATE_LOAD_REDIS_URL"),
                        help="Redis database for cache and broker (default: an empty database on "
                             "redis://127.0.0.1:6379, claimed for this run and emptied afterwards)")
    add_scratch_arguments(parser, "annotate_load")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    base = postgres_base_url()
    if base is None:
        return 2
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    claimed = args.redis_url is None
    if claimed:
        args.redis_url = claim_redis_db("redis://127.0.0.1:6379")
    tmp = Path(tempfile.mkdtemp(prefix="captionlab-annotate-load-"))
    results = []
    try:
        with scratch_database(base, args.db_name, keep=args.keep_db) as db:
            env = {**db.env, "REDIS_URL": args.redis_url, "CAPTIONLAB_PROFILE": "production",
                   "SECRET_KEY": secrets.token_urlsafe(50), "ALLOWED_HOSTS": "127.0.0.1",
                   "SECURE_SSL_REDIRECT": "false", "CONN_MAX_AGE": "600", "LOG_LEVEL": "WARNING",
                   "CAPTIONLAB_VAR_DIR": str(tmp / "var"), "STATIC_ROOT": str(tmp / "static")}
            t0 = time.monotonic()
            proc = subprocess.run([sys.executable, __file__, "--setup", str(args.tasks), str(max(levels)),
                                   str(args.votes_per_item)], cwd=ROOT, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                print(proc.stdout[-2000:], proc.stderr[-4000:])
                return 1
            data = json.loads(proc.stdout.strip().splitlines()[-1])
            campaign, tokens = data["campaign"], data["tokens"]
            print(f"data: {args.tasks} tasks x {args.votes_per_item} votes, {len(tokens)} annotators with tokens "
                  f"({time.monotonic() - t0:.1f} s); debounced schedule_aggregation: "
                  f"{data['debounce_us']:.0f} us per call (one Redis round trip)")

            port = free_port()
            gunicorn = [str(Path(sys.executable).parent / "gunicorn"), "captionlab.wsgi:application",
                        "-c", str(ROOT / "captionlab" / "gunicorn.conf.py"), "--bind", f"127.0.0.1:{port}"]
            if args.gunicorn_workers:
                gunicorn += ["--workers", str(args.gunicorn_workers)]
            if args.gunicorn_threads:
                gunicorn += ["--threads", str(args.gunicorn_threads)]
            if args.worker_class:
                gunicorn += ["--worker-class", args.worker_class]
            log = tmp / "gunicorn.log"
            web = start(gunicorn, env, log)
            wait_for_port(port, web, log)
            describe = subprocess.run([sys.executable, "-c", (
                "import runpy,sys; c=runpy.run_path(sys.argv[1]); "
                "print(c.get('worker_class'), c.get('workers'), c.get('threads'))"), str(ROOT / "captionlab" / "gunicorn.conf.py")],
                cwd=ROOT, env=env, capture_output=True, text=True).stdout.split()
            wc = args.worker_class or (describe[0] if describe else "?")
            nw = args.gunicorn_workers or (describe[1] if len(describe) > 1 else "?")
            nt = args.gunicorn_threads or (describe[2] if len(describe) > 2 else "?")
            print(f"gunicorn: {wc}, {nw} workers x {nt} threads, 127.0.0.1:{port}, PostgreSQL {args.db_name}, "
                  f"Redis {args.redis_url}, CONN_MAX_AGE=600, DEBUG off; {os.cpu_count()} CPU cores shared with PostgreSQL and the load")

            # warm-up: each gunicorn worker imports the app and opens its database connection
            warm = subprocess.run([sys.executable, __file__, "--drive", str(port), str(campaign), "2"],
                                  input=json.dumps(tokens[:8]), cwd=ROOT, capture_output=True, text=True)
            if warm.returncode != 0:
                print(warm.stderr[-3000:])
                return 1
            warm_out = json.loads(warm.stdout)
            if warm_out["errors"]:
                print("warm-up errors:", warm_out["errors"][:3])
                print(log.read_text()[:4000])
                return 1
            before, _ = stored_votes(db.dsn, campaign, [])

            print(f"\n{'workers':>7} {'votes/s':>8} {'acked':>7} {'stored':>7} {'errors':>6} "
                  f"{'fetch p50/p95/p99 ms':>22} {'submit p50/p95/p99 ms':>23} {'pair p50/p95/p99 ms':>22}")
            for level in levels:
                drive = subprocess.run([sys.executable, __file__, "--drive", str(port), str(campaign),
                                        str(args.duration)], input=json.dumps(tokens[:level]), cwd=ROOT,
                                       capture_output=True, text=True)
                if drive.returncode != 0:
                    print(drive.stderr[-3000:])
                    return 1
                out = json.loads(drive.stdout)
                total, found = stored_votes(db.dsn, campaign, out["acked"])
                stored = total - before
                before = total
                acked = len(out["acked"])
                row = {
                    "workers": level, "seconds": out["elapsed"], "votes_per_s": acked / out["elapsed"],
                    "acknowledged": acked, "stored": stored, "acknowledged_found": found,
                    "errors": len(out["errors"]), "error_samples": out["errors"][:5],
                    **{f"{k}_p{q}_ms": pct(out[k], q) for k in ("fetch", "submit", "pair") for q in (50, 95, 99)},
                }
                results.append(row)
                trio = lambda k: "/".join(f"{row[f'{k}_p{q}_ms']:.1f}" for q in (50, 95, 99))  # noqa: E731
                print(f"{level:>7} {row['votes_per_s']:>8.1f} {acked:>7} {stored:>7} {row['errors']:>6} "
                      f"{trio('fetch'):>22} {trio('submit'):>23} {trio('pair'):>22}", flush=True)
                for sample in row["error_samples"]:
                    print(f"        error: {sample}")
            problems = check_counters(db.dsn, campaign)
            _kill_all()

        # Targets.
        print()
        checks = []
        by_level = {r["workers"]: r for r in results}
        if 32 in by_level:
            r = by_level[32]
            checks.append((f"32 workers: {r['votes_per_s']:.1f} votes/s >= {TARGET_VOTES_PER_S:.0f}",
                           r["votes_per_s"] >= TARGET_VOTES_PER_S))
        if 1 in by_level:
            r = by_level[1]
            checks.append((f"1 worker: p95 of fetch + submit {r['pair_p95_ms']:.1f} ms < {TARGET_P95_MS:.0f} ms",
                           r["pair_p95_ms"] < TARGET_P95_MS))
        errors = sum(r["errors"] for r in results)
        checks.append((f"errors: {errors} at every level == 0", errors == 0))
        exact = all(r["stored"] == r["acknowledged"] == r["acknowledged_found"] for r in results)
        checks.append(("stored == acknowledged at every level: "
                       + ", ".join(f"{r['stored']}/{r['acknowledged']}" for r in results), exact))
        checks.append(("counters agree with votes, no duplicate votes"
                       + ("" if not problems else ": " + "; ".join(problems)), not problems))
        for text, ok in checks:
            print(f"{'PASS' if ok else 'FAIL'}  {text}")
        passed = all(ok for _, ok in checks)
        print(f"\n{'PASS' if passed else 'FAIL'}")
        if args.json:
            args.json.write_text(json.dumps({"passed": passed, "levels": results, "checks": checks}, indent=2))
        return 0 if passed else 1
    finally:
        _kill_all()
        try:
            if claimed:
                release_redis_db(args.redis_url)
            else:
                import redis

                redis.Redis.from_url(args.redis_url).delete("default")  # the aggregation messages queued
        except Exception:  # noqa: BLE001 - cleanup only
            pass


if __name__ == "__main__":
    sys.exit(main())
