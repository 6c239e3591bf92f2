"""CPU and memory of a running stack, from /proc: the web processes, the PostgreSQL backends of
one database, the Celery worker (each process with its descendants).

``StackSampler`` reads /proc/<pid>/stat (utime + stime) of every process of each group every
``interval`` seconds in a thread and keeps the last value seen per process, so a process that
exits between two snapshots still counts up to its last sample. ``cost(a, b)`` is the CPU
seconds each group spent between two snapshots."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SAMPLER_APP = "annotate_load_sampler"


def cpu_seconds(pid: int) -> float | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                kids = [int(k) for k in (task / "children").read_text().split()]
                out += kids
                todo += kids
        except OSError:
            continue
    return out


def pss_mib(pids) -> float:
    """Proportional set size of the processes, in MiB (/proc/<pid>/smaps_rollup)."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
                    break
        except OSError:
            continue
    return total / 1024


class StackSampler(threading.Thread):
    """``roots``: {group: root pid}; ``dsn``/``dbname``: the PostgreSQL backends of that database
    (client backends except this sampler's own) form the group "postgres"."""

    def __init__(self, roots: dict[str, int], dsn: str, dbname: str, interval: float = 0.25):
        super().__init__(daemon=True)
        self.roots, self.dsn, self.dbname, self.interval = roots, dsn, dbname, interval
        self.last: dict[tuple[str, int], float] = {}
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.error: str | None = None

    def pids(self, group: str) -> list[int]:
        root = self.roots[group]
        return [root] + descendants(root)

    def sample(self, conn) -> None:
        groups = {g: self.pids(g) for g in self.roots}
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid() "
                            "AND backend_type = 'client backend'", [self.dbname]).fetchall()
        groups["postgres"] = [r[0] for r in rows]
        with self.lock:
            for group, pids in groups.items():
                for pid in pids:
                    value = cpu_seconds(pid)
                    if value is not None:
                        self.last[(group, pid)] = value

    def run(self):
        import psycopg

        try:
            with psycopg.connect(self.dsn, autocommit=True, application_name=SAMPLER_APP) as conn:
                while not self.stop_event.is_set():
                    self.sample(conn)
                    time.sleep(self.interval)
        except Exception as exc:  # noqa: BLE001 - reported by the benchmark
            self.error = repr(exc)

    def snapshot(self) -> dict:
        time.sleep(self.interval * 2)  # at least one fresh sample
        with self.lock:
            return dict(self.last)

    def stop(self):
        self.stop_event.set()


def cost(before: dict, after: dict) -> dict[str, float]:
    """CPU seconds per group between two snapshots (a process new since ``before`` counts whole)."""
    out: dict[str, float] = {}
    for (group, pid), value in after.items():
        out[group] = out.get(group, 0.0) + max(value - before.get((group, pid), 0.0), 0.0)
    return out
