"""The fluency filter step is modeling's plug-in (issue 34): ModelingConfig.ready() registers it into curation's
step registry, so pipelines, presets and the API's step catalogue find it while curation never imports modeling."""
import json
import os
import subprocess
import sys
from pathlib import Path

from curation.pipeline import registry
from modeling.fluency_step import FluencyFilter

ROOT = Path(__file__).resolve().parents[2]


def test_the_registry_resolves_the_fluency_step_registered_at_app_ready():
    assert registry.get("fluency") is FluencyFilter
    assert "fluency" in registry.load_all() and "fluency_filter" not in registry.MODULES


def test_the_api_step_catalogue_lists_the_fluency_step(alice):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(alice)
    [entry] = [f for f in api.get("/api/pipelines/filters/").json() if f["name"] == "fluency"]
    assert entry["target"] == "caption" and entry["defaults"]["threshold"] == 0.5


def test_a_process_that_only_sets_django_up_knows_the_step():
    # What a Celery worker or the in-process executor has: django.setup() (every app's ready()), nothing else.
    code = """
import json, django
django.setup()
from curation.pipeline import registry
names = registry.load_all()
print(json.dumps({"fluency": names["fluency"].__module__}))
"""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "captionlab.settings"),
           "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"fluency": "modeling.fluency_step"}
