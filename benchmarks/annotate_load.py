#!/usr/bin/env python
"""Load on the annotator's real path, with the whole stack running as in production: gunicorn,
PostgreSQL, Redis and a Celery worker consuming ``default`` and ``aggregate``.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
    .venv/bin/python benchmarks/annotate_load.py [--tasks 1000,200000] [--levels 1,32] [--duration 20]
        [--scenarios browser,api] [--redis-url redis://127.0.0.1:6379/12]

For each campaign size of ``--tasks`` (its own scratch database, benchmarks/scratch_db.py):

1. fills it with bulk inserts: ``N`` images with a caption each, and one running GOOD/BAD quality
   campaign of ``N`` tasks per scenario (``--votes-per-item`` votes each), ``max(levels)``
   annotators (members, with a password and an API token);
2. starts ``gunicorn config.wsgi`` with config/gunicorn.conf.py (production profile,
   DEBUG off, persistent connections) and ``celery -A config worker -Q default,filters,aggregate``
   (production's command; aggregation exactly as production runs it: the incremental pass each
   vote schedules, the model-based full pass on its bounded schedule), both on the scratch
   database and a Redis database of their own;
3. scenario ``browser`` (the main one): the annotators log in through the login form (CSRF),
   then per level each opens the work page and repeats the htmx submit, reading the next task
   from the panel that comes back (benchmarks/annotate_load_client.py). Scenario ``api``: the
   JSON API (next, then vote) with tokens;
4. per level: votes/s, latency p50/p95/p99 of one submit-and-next, errors, stored ==
   acknowledged (each acknowledged (task, annotator) has its vote in PostgreSQL), and the CPU
   of the whole stack per stored vote: the web processes, the PostgreSQL backends serving the
   scratch database (pg_stat_activity) and the Celery worker with its children, sampled from
   /proc (benchmarks/stack_cpu.py) from the start of the level until the aggregation the level
   scheduled has run (debounce + a few seconds);
5. after the load: PSS of the web processes and of the worker (/proc/<pid>/smaps_rollup), and
   what the aggregation made of it (votes aggregated, when the models last ran).

With two sizes it also prints the ratio of CPU per vote, largest over smallest. Targets
(issue 23): browser path CPU per stored vote <= 15 ms, >= 150 votes/s at 32 clients, p95 < 30 ms
at 1 client, 0 errors, stored == acknowledged, CPU per vote at the largest size <= 1.1x the
smallest, web <= 150 MiB PSS, worker <= 300 MiB. Every process started is killed on exit and
the scratch databases dropped (``--keep-db`` keeps them).
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.scratch_db import (  # noqa: E402
    add_scratch_arguments,
    claim_redis_db,
    postgres_base_url,
    release_redis_db,
    scratch_database,
)
from benchmarks.stack_cpu import StackSampler, cost, descendants, pss_mib  # noqa: E402
from benchmarks.web_memory import free_port, kill_all, on_signal, start, wait_for_port  # noqa: E402

CLIENT = str(ROOT / "benchmarks" / "annotate_load_client.py")
TARGETS = {"cpu_ms": 15.0, "votes_per_s": 150.0, "p95_ms": 30.0, "ratio": 1.1, "web_mib": 150.0, "worker_mib": 300.0}


# --- 1. Data (a child process with the scratch database's settings) ------------------------------

def setup_data(n_tasks: int, n_users: int, votes_per_item: int, scenarios: list[str], password: str) -> dict:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from django.contrib.auth.models import Group
    from django.db import connection, transaction
    from rest_framework.authtoken.models import Token

    from annotation.models import Campaign, Membership, Task, Worker
    from captionlab import roles
    from curation.models import Caption, Collection, Image, text_hash

    texts = ["A big fluffy dog running on the beach at sunset.", "Trees in the snow on a cold winter morning.",
             "the rusty tractor against the golden wheat field", "two children play in the park near a fountain"]
    campaigns = {}
    with transaction.atomic():
        collection = Collection.objects.create(name="annotate load", source_kind=Collection.SourceKind.WEB_ALT_TEXT)
        Image.objects.bulk_create(
            [Image(collection=collection, sha256=f"{i:064x}", width=640, height=480, format="JPEG",
                   external_id=f"load-{i}", status=Image.Status.READY) for i in range(n_tasks)], batch_size=10000)
        image_ids = list(Image.objects.filter(collection=collection).order_by("pk").values_list("pk", flat=True))
        captions = [Caption(image_id=image_id, text=f"{texts[i % len(texts)]} ({i})",
                            text_hash=text_hash(f"{texts[i % len(texts)]} ({i})"),
                            origin=Caption.Origin.ALT_TEXT, source="load") for i, image_id in enumerate(image_ids)]
        Caption.objects.bulk_create(captions, batch_size=10000)
        del captions
        pairs = list(Caption.objects.filter(image__collection=collection).order_by("pk").values_list("pk", "image_id"))
        group, _ = Group.objects.get_or_create(name=roles.ANNOTATOR)
        User = get_user_model()
        hashed = make_password(password)  # one hash for all: hashing is slow
        users = User.objects.bulk_create([User(username=f"load{i}", password=hashed) for i in range(n_users)])
        User.groups.through.objects.bulk_create([User.groups.through(user_id=u.pk, group_id=group.pk) for u in users])
        workers = Worker.objects.bulk_create([Worker(user=u) for u in users])
        for scenario in scenarios:
            campaign = Campaign.objects.create(name=f"annotate load {scenario}", kind="quality", collection=collection,
                                               status=Campaign.Status.RUNNING, votes_per_item=votes_per_item,
                                               selection={"collection": collection.pk})
            for i in range(0, len(pairs), 20000):
                Task.objects.bulk_create(
                    [Task(campaign=campaign, image_id=image_id, caption_id=caption_id, votes_required=votes_per_item,
                          position=j, priority=float(j))
                     for j, (caption_id, image_id) in enumerate(pairs[i:i + 20000], i + 1)], batch_size=10000)
            Membership.objects.bulk_create([Membership(campaign=campaign, worker=w) for w in workers])
            campaigns[scenario] = campaign.pk
        tokens = [Token.objects.create(user=u).key for u in users]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return {"campaigns": campaigns, "users": [u.username for u in users], "tokens": tokens}


# --- 2. Helpers ---------------------------------------------------------------------------------

def pct(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, max(0, int(round(q / 100 * (len(values) - 1)))))] * 1000


def client(args: list[str], stdin) -> dict:
    """Run the load generator; its answer, with the CPU seconds it used (``client_cpu_s``)."""
    import resource

    def children_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    before = children_cpu()
    proc = subprocess.run([sys.executable, CLIENT, *map(str, args)], input=json.dumps(stdin), cwd=ROOT,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"load generator failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout)
    if isinstance(out, dict):
        out["client_cpu_s"] = children_cpu() - before
    return out


def stored(dsn: str, campaign: int, acked: list) -> tuple[int, int]:
    """(votes of the campaign, how many acknowledged (task, username) pairs have their vote)."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        total = conn.execute("SELECT count(*) FROM annotation_vote WHERE campaign_id = %s", [campaign]).fetchone()[0]
        found = conn.execute("""
            SELECT count(*) FROM annotation_vote v JOIN annotation_worker w ON w.id = v.worker_id
            JOIN auth_user u ON u.id = w.user_id
            JOIN unnest(%s::bigint[], %s::text[]) AS a(task, username) ON a.task = v.task_id AND a.username = u.username
            WHERE v.campaign_id = %s""", [[a[0] for a in acked], [a[1] for a in acked], campaign]).fetchone()[0]
    return total, found


def aggregation_state(dsn: str, campaign: int) -> dict:
    import psycopg

    with psycopg.connect(dsn) as conn:
        stats = conn.execute("SELECT stats FROM annotation_campaign WHERE id = %s", [campaign]).fetchone()[0] or {}
    inc = stats.get("incremental") or {}
    return {"n_votes": stats.get("n_votes"), "computed_at": stats.get("computed_at"),
            "models_computed_at": stats.get("models_computed_at"), "pending_votes": inc.get("pending_votes")}


def model_pass(dsn: str, env: dict, sampler, worker_pid: int, campaign: int, rows: list[dict]) -> dict:
    """One full pass with the model-based methods, queued as the recompute button does and run by
    the worker (its crowd-kit fits in a child process): its CPU (the worker group, sampled) and the
    worker's peak PSS while it runs; amortised at the schedule's floor (ANNOTATION_MODELS_MIN_INTERVAL
    seconds between passes) over the fastest level's vote rate."""
    before = aggregation_state(dsn, campaign)["models_computed_at"]
    snap0 = sampler.snapshot()
    subprocess.run([str(Path(sys.executable).parent / "celery"), "-A", "config", "call",
                    "annotation.aggregate_campaign", "--args", json.dumps([campaign]), "--queue", "aggregate"],
                   cwd=ROOT, env=env, check=True, capture_output=True)
    peak, deadline = 0.0, time.monotonic() + 300
    while time.monotonic() < deadline:
        peak = max(peak, pss_mib([worker_pid] + descendants(worker_pid)))
        state = aggregation_state(dsn, campaign)
        if state["models_computed_at"] != before:
            break
        time.sleep(0.1)
    else:
        raise RuntimeError("the on-demand model-based pass did not finish in 300 s")
    time.sleep(1.0)  # the task's last writes and the sampler's last look at the child
    cpu = cost(snap0, sampler.snapshot()).get("worker", 0.0)
    interval = int(env.get("ANNOTATION_MODELS_MIN_INTERVAL", 300))
    rate = max((r["votes_per_s"] for r in rows), default=0.0)
    return {"n_votes": state["n_votes"], "cpu_s": cpu, "peak_mib": peak, "interval_s": interval,
            "votes_per_s": rate, "ms_per_vote": 1000 * cpu / (interval * rate) if rate else float("nan")}


def clear_redis(url: str) -> None:
    """The queues and cache keys a run left (campaign ids repeat from one scratch database to the next)."""
    import redis

    r = redis.Redis.from_url(url)
    keys = list(r.scan_iter("captionlab*")) + list(r.scan_iter("celery-task-meta-*"))
    keys += [k for k in (b"default", b"aggregate", b"filters", b"unacked", b"unacked_index") if r.exists(k)]
    if keys:
        r.delete(*keys)


# --- 3. One campaign size ------------------------------------------------------------------------

def run_size(args, base: str, n_tasks: int, levels: list[int], scenarios: list[str], db_name: str) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="captionlab-annotate-load-"))
    rows, memory, aggregation = [], {}, {}
    with scratch_database(base, db_name, keep=args.keep_db) as db:
        env = {**db.env, "REDIS_URL": args.redis_url, "CAPTIONLAB_PROFILE": "production",
               "SECRET_KEY": secrets.token_urlsafe(50), "ALLOWED_HOSTS": "127.0.0.1",
               "SECURE_SSL_REDIRECT": "false", "CONN_MAX_AGE": "600", "LOG_LEVEL": "WARNING",
               "CAPTIONLAB_VAR_DIR": str(tmp / "var"), "STATIC_ROOT": str(tmp / "static")}
        password = secrets.token_urlsafe(12)
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, __file__, "--setup", str(n_tasks), str(max(levels)),
                               str(args.votes_per_item), ",".join(scenarios), password],
                              cwd=ROOT, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"setup failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
        data = json.loads(proc.stdout.strip().splitlines()[-1])
        static = subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=ROOT,
                                env=env, capture_output=True, text=True)  # the production profile's manifest
        if static.returncode != 0:
            raise RuntimeError(f"collectstatic failed:\n{static.stderr[-3000:]}")
        print(f"\n== {n_tasks} tasks per campaign ({', '.join(scenarios)}), {len(data['users'])} annotators; "
              f"data in {time.monotonic() - t0:.0f} s (bulk inserts), database {db_name}", flush=True)

        port = free_port()
        gunicorn = [str(Path(sys.executable).parent / "gunicorn"), "config.wsgi:application",
                    "-c", str(ROOT / "config" / "gunicorn.conf.py"), "--bind", f"127.0.0.1:{port}"]
        web = start(gunicorn, env, tmp / "gunicorn.log")
        celery = [str(Path(sys.executable).parent / "celery"), "-A", "config", "worker",
                  "-Q", "default,filters,aggregate", "-l", "warning", "-n", f"annotate-load-{os.getpid()}@%h"]
        worker = start(celery, env, tmp / "celery.log")
        wait_for_port(port, web, tmp / "gunicorn.log")
        sampler = StackSampler({"web": web.pid, "worker": worker.pid}, db.dsn, db_name)
        sampler.start()
        settle = args.settle
        for scenario in scenarios:
            campaign = data["campaigns"][scenario]
            if scenario == "browser":
                users = data["users"][:max(levels)]
                cookies = client(["login", port, campaign], {"users": users, "password": password})
                clients = [{"user": u, "cookies": c} for u, c in zip(users, cookies)]
            else:
                clients = [{"user": u, "token": t} for u, t in zip(data["users"], data["tokens"])]
            warm = client(["drive", port, scenario, campaign, 2], clients[:8])
            if warm["errors"]:
                raise RuntimeError(f"warm-up errors ({scenario}): {warm['errors'][:3]}\n"
                                   f"{(tmp / 'gunicorn.log').read_text()[-3000:]}")
            time.sleep(settle)  # the warm-up's aggregation (and the first full pass) out of the way
            for level in levels:
                before, _ = stored(db.dsn, campaign, [])
                snap0 = sampler.snapshot()
                out = client(["drive", port, scenario, campaign, args.duration], clients[:level])
                time.sleep(settle)  # the aggregation these votes scheduled runs in the worker
                snap1 = sampler.snapshot()
                total, found = stored(db.dsn, campaign, out["acked"])
                cpu = cost(snap0, snap1)
                n = total - before
                row = {"tasks": n_tasks, "scenario": scenario, "clients": level, "seconds": out["elapsed"],
                       "votes_per_s": len(out["acked"]) / out["elapsed"], "acknowledged": len(out["acked"]),
                       "stored": n, "acknowledged_found": found, "errors": len(out["errors"]),
                       "error_samples": out["errors"][:5], "finished": out["finished"],
                       **{f"p{q}_ms": pct(out["pair"], q) for q in (50, 95, 99)},
                       "open_p50_ms": pct(out["open"], 50),
                       "cpu_s": cpu, **{f"cpu_{g}_ms_per_vote": (1000 * cpu.get(g, 0.0) / n if n else float("nan"))
                                        for g in ("web", "postgres", "worker")},
                       "cpu_ms_per_vote": 1000 * sum(cpu.values()) / n if n else float("nan"),
                       "client_cpu_ms_per_vote": 1000 * out["client_cpu_s"] / n if n else float("nan")}
                # What these cores could carry if nothing else ran: every vote costs the stack's CPU and
                # the load generator's (which shares the cores here).
                row["ceiling_votes_per_s"] = (1000 * (os.cpu_count() or 1)
                                              / (row["cpu_ms_per_vote"] + row["client_cpu_ms_per_vote"]))
                rows.append(row)
                print(f"{n_tasks:>7} {scenario:>8} {level:>4} {row['votes_per_s']:>8.1f} {row['acknowledged']:>6} "
                      f"{n:>6} {row['errors']:>5}  {row['p50_ms']:>6.1f} {row['p95_ms']:>6.1f} {row['p99_ms']:>6.1f}"
                      f"  {row['cpu_ms_per_vote']:>6.1f} = {row['cpu_web_ms_per_vote']:.1f} web + "
                      f"{row['cpu_postgres_ms_per_vote']:.1f} pg + {row['cpu_worker_ms_per_vote']:.1f} worker; "
                      f"load generator {row['client_cpu_ms_per_vote']:.1f} ms/vote, so {os.cpu_count()} cores carry at "
                      f"most {row['ceiling_votes_per_s']:.0f} votes/s", flush=True)
                for sample in row["error_samples"]:
                    print(f"        error: {sample}")
            aggregation[scenario] = aggregation_state(db.dsn, campaign)
        memory = {"web_pss_mib": pss_mib([web.pid] + descendants(web.pid)),
                  "worker_pss_mib": pss_mib([worker.pid] + descendants(worker.pid)),
                  "web_processes": 1 + len(descendants(web.pid)), "worker_processes": 1 + len(descendants(worker.pid))}
        models = model_pass(db.dsn, env, sampler, worker.pid, data["campaigns"][scenarios[0]], rows)
        sampler.stop()
        if sampler.error:
            print(f"warning: the CPU sampler stopped: {sampler.error}")
        print(f"memory after load: web {memory['web_pss_mib']:.0f} MiB PSS ({memory['web_processes']} processes), "
              f"worker {memory['worker_pss_mib']:.0f} MiB PSS ({memory['worker_processes']} processes)")
        for scenario, state in aggregation.items():
            print(f"aggregation of the {scenario} campaign: {state['n_votes']} votes aggregated at "
                  f"{state['computed_at']}; model-based methods at {state['models_computed_at']}, "
                  f"{state['pending_votes']} votes since")
        print(f"model-based pass on demand ({scenarios[0]} campaign, {models['n_votes']} votes): "
              f"{models['cpu_s']:.2f} CPU-s in the worker and its fitting process, worker peak "
              f"{models['peak_mib']:.0f} MiB PSS during it; at the schedule's floor (one pass per "
              f"{models['interval_s']} s) and {models['votes_per_s']:.0f} votes/s that adds "
              f"{models['ms_per_vote']:.2f} ms per vote")
        kill_all()
    clear_redis(args.redis_url)
    shutil.rmtree(tmp, ignore_errors=True)  # logs and collected static files of this size
    return {"tasks": n_tasks, "rows": rows, "memory": memory, "aggregation": aggregation, "models": models}


# --- 4. The run ---------------------------------------------------------------------------------

def checks(sizes: list[dict]) -> list[tuple[str, bool]]:
    out = []
    small, large = sizes[0], sizes[-1]
    for size in sizes:
        browser = {r["clients"]: r for r in size["rows"] if r["scenario"] == "browser"}
        tag = f"{size['tasks']} tasks, browser"
        if 32 in browser:
            r = browser[32]
            out.append((f"{tag}, 32 clients: {r['votes_per_s']:.1f} votes/s >= {TARGETS['votes_per_s']:.0f}",
                        r["votes_per_s"] >= TARGETS["votes_per_s"]))
            out.append((f"{tag}, 32 clients: whole-stack CPU {r['cpu_ms_per_vote']:.1f} ms per stored vote <= "
                        f"{TARGETS['cpu_ms']:.0f}", r["cpu_ms_per_vote"] <= TARGETS["cpu_ms"]))
        if 1 in browser:
            r = browser[1]
            out.append((f"{tag}, 1 client: p95 of submit-and-next {r['p95_ms']:.1f} ms < {TARGETS['p95_ms']:.0f}",
                        r["p95_ms"] < TARGETS["p95_ms"]))
        m = size["memory"]
        out.append((f"{size['tasks']} tasks: web {m['web_pss_mib']:.0f} MiB PSS <= {TARGETS['web_mib']:.0f}",
                    m["web_pss_mib"] <= TARGETS["web_mib"]))
        out.append((f"{size['tasks']} tasks: worker {m['worker_pss_mib']:.0f} MiB PSS <= {TARGETS['worker_mib']:.0f}",
                    m["worker_pss_mib"] <= TARGETS["worker_mib"]))
    rows = [r for s in sizes for r in s["rows"]]
    errors = sum(r["errors"] for r in rows)
    out.append((f"errors: {errors} == 0", errors == 0))
    out.append(("stored == acknowledged everywhere: " + ", ".join(f"{r['stored']}/{r['acknowledged']}" for r in rows),
                all(r["stored"] == r["acknowledged"] == r["acknowledged_found"] for r in rows)))
    if large is not small:
        for scenario in ("browser", "api"):
            for level in sorted({r["clients"] for r in rows}):
                a = next((r for r in small["rows"] if r["scenario"] == scenario and r["clients"] == level), None)
                b = next((r for r in large["rows"] if r["scenario"] == scenario and r["clients"] == level), None)
                if a and b and a["cpu_ms_per_vote"] > 0:
                    ratio = b["cpu_ms_per_vote"] / a["cpu_ms_per_vote"]
                    out.append((f"{scenario}, {level} clients: CPU per vote at {large['tasks']} / at {small['tasks']} "
                                f"tasks = {ratio:.2f} <= {TARGETS['ratio']}", ratio <= TARGETS["ratio"]))
    return out


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--setup":
        n_tasks, n_users, votes = map(int, sys.argv[2:5])
        print(json.dumps(setup_data(n_tasks, n_users, votes, sys.argv[5].split(","), sys.argv[6])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="1000,200000", help="campaign sizes, comma-separated (default 1000,200000)")
    parser.add_argument("--levels", default="1,32", help="concurrent annotators per level (default 1,32)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per level (default 20)")
    parser.add_argument("--scenarios", default="browser,api", help="browser, api or both (default both)")
    parser.add_argument("--votes-per-item", type=int, default=3)
    parser.add_argument("--settle", type=float, default=14.0,
                        help="seconds after each level for the aggregation it scheduled (default 14: the 10 s "
                             "debounce and the pass itself)")
    parser.add_argument("--redis-url", default=os.environ.get("ANNOTATE_LOAD_REDIS_URL"),
                        help="Redis database for cache and broker (default: an empty database on "
                             "redis://127.0.0.1:6379, claimed for this run and emptied afterwards)")
    add_scratch_arguments(parser, "annotate_load")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    levels = sorted(int(x) for x in args.levels.split(",") if x.strip())
    sizes = sorted(int(x) for x in args.tasks.split(",") if x.strip())
    scenarios = [s for s in args.scenarios.split(",") if s.strip()]
    if not levels or not sizes or set(scenarios) - {"browser", "api"} or not scenarios:
        parser.error("--levels and --tasks need numbers; --scenarios is browser, api or both")
    base = postgres_base_url()
    if base is None:
        return 2
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    claimed = args.redis_url is None
    if claimed:
        args.redis_url = claim_redis_db("redis://127.0.0.1:6379")
    results = []
    try:
        print(f"{os.cpu_count()} CPU cores shared by the load generator, gunicorn, PostgreSQL, Redis and the worker; "
              f"Redis {args.redis_url}; {args.duration:.0f} s per level")
        print(f"\n{'tasks':>7} {'scenario':>8} {'cl.':>4} {'votes/s':>8} {'acked':>6} {'stored':>6} {'err':>5}  "
              f"{'p50':>6} {'p95':>6} {'p99':>6}  CPU ms per stored vote (whole stack)")
        for n in sizes:
            name = args.db_name if len(sizes) == 1 else f"{args.db_name}_{n}"[:63]
            results.append(run_size(args, base, n, levels, scenarios, name))
        print()
        verdicts = checks(results)
        for text, ok in verdicts:
            print(f"{'PASS' if ok else 'FAIL'}  {text}")
        passed = all(ok for _, ok in verdicts)
        print(f"\n{'PASS' if passed else 'FAIL'}")
        if args.json:
            args.json.write_text(json.dumps({"passed": passed, "sizes": results, "checks": verdicts}, indent=2,
                                            default=str))
        return 0 if passed else 1
    finally:
        kill_all()
        try:
            if claimed:
                release_redis_db(args.redis_url)
            else:
                clear_redis(args.redis_url)
        except Exception:  # noqa: BLE001 - cleanup only
            pass


if __name__ == "__main__":
    sys.exit(main())
