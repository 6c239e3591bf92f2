"""captionlab/gunicorn.conf.py: the memory settings of the web processes load and do what they say."""
import gc
import runpy
from pathlib import Path

CONF = Path(__file__).resolve().parents[1] / "captionlab" / "gunicorn.conf.py"


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
