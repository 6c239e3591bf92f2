"""config/gunicorn.conf.py: the memory settings of the web processes load and do what they say."""
import gc
import runpy
from pathlib import Path

CONF = Path(__file__).resolve().parents[1] / "config" / "gunicorn.conf.py"


def test_the_master_collects_nothing_while_loading_and_freezes_before_each_fork(monkeypatch):
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    was_enabled = gc.isenabled()
    try:
        conf = runpy.run_path(str(CONF))
        assert not gc.isenabled()  # while the application is imported
        before = gc.get_freeze_count()
        conf["pre_fork"](None, None)
        assert gc.isenabled()
        assert gc.get_freeze_count() > before
        assert conf["worker_class"] == "gthread" and conf["preload_app"] is True
    finally:
        gc.unfreeze()
        (gc.enable if was_enabled else gc.disable)()


def _conf(monkeypatch, **env):
    for name in ("GUNICORN_WORKERS", "GUNICORN_THREADS", "MALLOC_ARENA_MAX"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    was_enabled = gc.isenabled()
    try:
        return runpy.run_path(str(CONF))
    finally:
        (gc.enable if was_enabled else gc.disable)()


def test_one_web_process_per_two_usable_cores_unless_told(monkeypatch):
    import os

    conf = _conf(monkeypatch)
    cores = conf["usable_cores"]()
    assert 1 <= cores <= len(os.sched_getaffinity(0))
    assert conf["workers"] == max(1, cores // 2) and conf["threads"] == 8
    assert _conf(monkeypatch, GUNICORN_WORKERS="3", GUNICORN_THREADS="4")["workers"] == 3
    assert _conf(monkeypatch, GUNICORN_WORKERS="")["workers"] == max(1, cores // 2)  # compose's empty default


def test_a_cgroup_cpu_quota_caps_the_cores(monkeypatch, tmp_path):
    import os

    usable = _conf(monkeypatch)["usable_cores"]
    affinity = len(os.sched_getaffinity(0))
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.max").write_text("150000 100000\n")  # docker run --cpus 1.5
    assert usable(str(v2)) == min(affinity, 2)
    (v2 / "cpu.max").write_text("50000 100000\n")  # half a core still gets one process
    assert usable(str(v2)) == 1
    (v2 / "cpu.max").write_text("max 100000\n")
    assert usable(str(v2)) == affinity
    v1 = tmp_path / "v1" / "cpu"
    v1.mkdir(parents=True)
    (v1 / "cpu.cfs_quota_us").write_text("100000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    assert usable(str(tmp_path / "v1")) == 1
    (v1 / "cpu.cfs_quota_us").write_text("-1\n")
    assert usable(str(tmp_path / "v1")) == affinity
    assert usable(str(tmp_path / "none")) == affinity
