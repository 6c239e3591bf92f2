"""What the web and the Celery worker import before they fork (issue 23: web <= 150 MiB PSS, worker
<= 300 MiB after benchmarks/annotate_load.py).

gunicorn's master imports config.wsgi (settings, apps, every URLconf and view) and its workers
share those pages; the worker's main process imports the task modules. Each check runs in a fresh interpreter,
so what another test imported does not count.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Libraries that only curation runs, training, searches by meaning or the model-based aggregation use.
HEAVY = ("numpy", "pandas", "pyarrow", "scipy", "sklearn", "crowdkit", "krippendorff", "nltk", "lingua",
         "wordfreq", "spacy", "torch", "transformers", "sentence_transformers", "faiss")


def _fresh(code: str) -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _loaded(names) -> str:
    return f"json.dumps(sorted({{n.split('.')[0] for n in sys.modules}} & {set(names)!r}))"


def test_the_web_application_with_every_view_imports_no_heavy_library():
    loaded = _fresh(f"import json, sys\nimport config.wsgi\nprint({_loaded(HEAVY)})")
    assert loaded == []


def test_the_web_application_builds_the_url_reverse_tables_and_the_annotator_templates_before_the_fork():
    # Each worker would otherwise build its own copy on its first requests (about 10 MiB a worker).
    code = """
import json
import config.wsgi
from django.template import engines
from django.urls import get_resolver
cached = {name for engine in engines.all() for loader in engine.engine.template_loaders
          for name in getattr(loader, "get_template_cache", {})}
print(json.dumps({"reverse_tables": get_resolver()._populated,
                  "missing_templates": sorted(set(config.wsgi.ANNOTATOR_TEMPLATES) - cached)}))
"""
    assert _fresh(code) == {"reverse_tables": True, "missing_templates": []}


def test_the_worker_task_modules_import_no_heavy_library():
    # crowd-kit and pandas come with the worker_init preload (annotation/tasks.py) or the first pass,
    # never with the task modules themselves: the web imports some of them too.
    code = f"""
import json, sys
from config.celery import app
app.loader.import_default_modules()
print({_loaded(HEAVY)})
"""
    assert _fresh(code) == []


def test_the_search_api_documents_the_modes_search_accepts():
    from curation.api_search import SEARCH_MODES
    from pack.embeddings import search

    assert SEARCH_MODES == search.MODES
