#!/usr/bin/env python
"""Idle memory of the CaptionLab web processes: gunicorn, 2 workers, --preload, production profile.

    .venv/bin/python benchmarks/web_memory.py [--idle 5] [--requests 40] [--json out.json]

What it does, all in one run:

1. collects the static files into a temporary folder (the production profile serves them through
   WhiteNoise's manifest storage) and, without DATABASE_URL, migrates a temporary SQLite database;
2. starts ``gunicorn config.wsgi:application --workers 2 --preload`` on a free port with
   CAPTIONLAB_PROFILE=production, a generated SECRET_KEY, ALLOWED_HOSTS=127.0.0.1 and
   SECURE_SSL_REDIRECT=false, and sends a few rounds of requests (login page, a 302 redirect to
   the login, the API root, a static file) so both workers have served pages;
3. waits while it idles, then reads the PSS (proportional set size: shared pages divided among the
   processes sharing them, so the figures add up) of the master and of each worker from
   /proc/<pid>/smaps_rollup;
4. checks that no worker has torch or spaCy loaded (their shared objects in /proc/<pid>/maps) and
   that importing the WSGI application imports neither module;
5. does the same for a baseline in the same run: gunicorn with 2 workers serving a trivial WSGI
   app (the floor of Python + gunicorn), and a bare ``python -c 'import django'`` process;
6. prints per-process PSS, the workers' total (the figure the 150 MiB target is about), the total
   with the master, the ratios to the baseline, and PASS or FAIL.

Every process it starts is killed on exit. Linux only (/proc).
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_MIB = 150.0
HEAVY_LIBS = ("libtorch", "torch/_C", "torch/lib/", "/spacy/", "/thinc/", "/blis/", "/cymem/", "/preshed/")
WORKERS = 2

_started: list[subprocess.Popen] = []


# --- Processes ------------------------------------------------------------------------------------

def kill_all() -> None:
    for proc in reversed(_started):
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
    deadline = time.monotonic() + 10
    for proc in _started:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    _started.clear()


def on_signal(signum, frame):
    kill_all()
    sys.exit(128 + signum)


def start(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    """Starts a process in its own process group (so the group can be killed), output to log."""
    fh = open(log, "wb")
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    _started.append(proc)
    return proc


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on port {port} after {timeout}s:\n{log.read_text()[-3000:]}")


def children(pid: int) -> list[int]:
    kids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        kids += [int(k) for k in text]
    return sorted(kids)


def wait_for_workers(pid: int, count: int, timeout: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kids = children(pid)
        if len(kids) >= count:
            return kids
        time.sleep(0.2)
    raise RuntimeError(f"gunicorn {pid} has {len(children(pid))} workers, expected {count}")


# --- Memory ---------------------------------------------------------------------------------------

def memory(pid: int) -> dict[str, float]:
    """PSS, RSS and USS (private pages) in MiB from /proc/<pid>/smaps_rollup."""
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[-1] == "kB":
            fields[key.strip()] = int(parts[0]) / 1024
    return {
        "pss": fields.get("Pss", 0.0),
        "rss": fields.get("Rss", 0.0),
        "uss": fields.get("Private_Clean", 0.0) + fields.get("Private_Dirty", 0.0),
    }


def heavy_libraries(pid: int) -> list[str]:
    found = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        path = line.split(maxsplit=5)[5] if len(line.split(maxsplit=5)) == 6 else ""
        if ".so" in path and any(lib in path for lib in HEAVY_LIBS):
            found.add(path)
    return sorted(found)


# --- The run --------------------------------------------------------------------------------------

def production_env(tmp: Path) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", str(tmp)),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "CAPTIONLAB_PROFILE": "production",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_SSL_REDIRECT": "false",
        "CAPTIONLAB_VAR_DIR": str(tmp / "var"),
        "STATIC_ROOT": str(tmp / "static"),
        "MEDIA_ROOT": str(tmp / "media"),
        "LOG_LEVEL": "WARNING",
    }
    for name in ("DATABASE_URL", "REDIS_URL", "PYTHONPATH"):  # the services when given; --app modules
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env


def manage(env: dict, *args: str) -> None:
    proc = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}")


def gunicorn(app: str, env: dict, tmp: Path, name: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    exe = Path(sys.executable).parent / "gunicorn"
    log = tmp / f"{name}.log"
    proc = start(
        [str(exe), app, "--workers", str(WORKERS), "--preload", "--bind", f"127.0.0.1:{port}",
         "--log-level", "warning"],
        env, log,
    )
    wait_for_port(port, proc, log)
    wait_for_workers(proc.pid, WORKERS)
    return proc, port


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def request(port: int, path: str) -> int:
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(f"http://127.0.0.1:{port}{path}", timeout=30) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def measure(proc: subprocess.Popen) -> dict:
    workers = children(proc.pid)
    return {
        "master": {"pid": proc.pid, **memory(proc.pid)},
        "workers": [{"pid": pid, **memory(pid), "heavy": heavy_libraries(pid)} for pid in workers],
    }


def import_check(env: dict) -> list[str]:
    code = ("import sys; import config.wsgi; "
            "print(','.join(m for m in ('torch', 'spacy', 'thinc') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"importing config.wsgi failed:\n{proc.stderr[-3000:]}")
    return [m for m in proc.stdout.strip().split(",") if m]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", type=float, default=5.0, help="seconds to idle before measuring (default 5)")
    parser.add_argument("--requests", type=int, default=40, help="requests per URL (default 40)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs)")
    parser.add_argument("--app", default="config.wsgi:application",
                        help="WSGI application to measure (default %(default)s; for trying a variant)")
    args = parser.parse_args()
    if not Path("/proc/self/smaps_rollup").exists():
        print("This benchmark reads /proc/<pid>/smaps_rollup: Linux 4.14 or newer only.", file=sys.stderr)
        return 2

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    tmp = Path(tempfile.mkdtemp(prefix="captionlab-web-memory-"))
    try:
        env = production_env(tmp)
        db = "PostgreSQL (DATABASE_URL)" if "DATABASE_URL" in env else "SQLite (temporary)"
        print(f"CaptionLab web memory: gunicorn, {WORKERS} workers, --preload, production profile, {db}")
        print("preparing: collectstatic" + ("" if "DATABASE_URL" in env else " + migrate"), flush=True)
        manage(env, "collectstatic", "--noinput", "-v", "0")
        if "DATABASE_URL" not in env:
            manage(env, "migrate", "--noinput", "-v", "0")

        # The platform.
        web, port = gunicorn(args.app, env, tmp, "captionlab")
        statuses: dict[str, set[int]] = {}
        paths = ["/accounts/login/", "/", "/api/", "/static/vendor/htmx.min.js"]
        for _ in range(args.requests):
            for path in paths:
                statuses.setdefault(path, set()).add(request(port, path))
        print("requests: " + ", ".join(f"{p} -> {'/'.join(map(str, sorted(s)))}" for p, s in statuses.items()))
        problems = []
        if statuses["/accounts/login/"] != {200}:
            problems.append(f"login page answered {statuses['/accounts/login/']}")
        if statuses["/"] != {302}:
            problems.append(f"/ answered {statuses['/']} (expected a 302 to the login page)")
        time.sleep(args.idle)
        platform = measure(web)

        # Baseline 1: gunicorn serving a trivial WSGI app, same options.
        trivial = tmp / "trivial_wsgi.py"
        trivial.write_text(
            "def application(environ, start_response):\n"
            "    start_response('200 OK', [('Content-Type', 'text/plain')])\n"
            "    return [b'ok']\n"
        )
        base_env = {**env, "PYTHONPATH": str(tmp)}
        base, base_port = gunicorn("trivial_wsgi:application", base_env, tmp, "trivial")
        for _ in range(args.requests):
            request(base_port, "/")
        time.sleep(args.idle)
        baseline = measure(base)

        # Baseline 2: a bare Python process that imported Django.
        bare = start([sys.executable, "-c", "import django, time; time.sleep(3600)"], env, tmp / "bare.log")
        time.sleep(max(1.0, args.idle / 2))
        bare_mem = memory(bare.pid)

        imported = import_check(env)
        kill_all()

        # Report.
        def row(label, m, extra=""):
            print(f"  {label:<26} PSS {m['pss']:7.1f} MiB   RSS {m['rss']:7.1f} MiB   USS {m['uss']:7.1f} MiB{extra}")

        print(f"\nCaptionLab ({args.app})")
        row(f"master   pid {platform['master']['pid']}", platform["master"])
        for w in platform["workers"]:
            row(f"worker   pid {w['pid']}", w, "   torch/spaCy loaded!" if w["heavy"] else "")
        workers_pss = sum(w["pss"] for w in platform["workers"])
        total_pss = workers_pss + platform["master"]["pss"]
        print(f"  workers total PSS {workers_pss:.1f} MiB; with the master {total_pss:.1f} MiB")

        print("\nBaseline: gunicorn serving a trivial WSGI app (same options)")
        row(f"master   pid {baseline['master']['pid']}", baseline["master"])
        for w in baseline["workers"]:
            row(f"worker   pid {w['pid']}", w)
        base_workers = sum(w["pss"] for w in baseline["workers"])
        base_total = base_workers + baseline["master"]["pss"]
        print(f"  workers total PSS {base_workers:.1f} MiB; with the master {base_total:.1f} MiB")
        print("\nBaseline: bare `python -c 'import django'`")
        row(f"python   pid {bare.pid}", bare_mem)

        heavy = sorted({lib for w in platform["workers"] for lib in w["heavy"]})
        print("\nHeavy libraries in the web workers (torch, spaCy): "
              + ("none" if not heavy else ", ".join(heavy)))
        print("Modules imported by `import config.wsgi`: " + ("no torch, no spaCy" if not imported else ", ".join(imported)))
        print(f"\nRatio, workers' PSS: CaptionLab / trivial gunicorn = {workers_pss / base_workers:.2f}x "
              f"({workers_pss - base_workers:+.1f} MiB for Django + the platform)")
        print(f"Ratio, with the master: {total_pss / base_total:.2f}x; "
              f"per worker vs bare `import django`: {workers_pss / WORKERS / bare_mem['pss']:.2f}x")

        passed = workers_pss < TARGET_MIB and not heavy and not imported and not problems
        for problem in problems:
            print(f"problem: {problem}")
        verdict = "PASS" if passed else "FAIL"
        print(f"\nTarget: 2 idle web workers under {TARGET_MIB:.0f} MiB PSS in total, no torch/spaCy: "
              f"{workers_pss:.1f} MiB -> {verdict}")

        if args.json:
            args.json.write_text(json.dumps({
                "target_mib": TARGET_MIB, "passed": passed, "workers_pss_mib": workers_pss,
                "total_pss_mib": total_pss, "platform": platform, "baseline_trivial_gunicorn": baseline,
                "baseline_bare_django": bare_mem, "imported_heavy_modules": imported, "statuses":
                {p: sorted(s) for p, s in statuses.items()},
            }, indent=2))
        return 0 if passed else 1
    finally:
        kill_all()
        if args.keep:
            print(f"(kept {tmp})")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
