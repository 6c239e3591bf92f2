"""Content-Security-Policy (django-csp, issue 25): every page carries the header, scripts come from the
platform or carry the request's nonce, images from the platform only; CSP_REPORT_ONLY sends the same
policy as report-only."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[1]
PAGES = {  # a sample per role
    "anonymous": ["login"],
    "annotator": ["home", "annotate-list"],
    "curator": ["home", "collection-list", "import-list", "import-create", "pipeline-list", "run-list",
                "campaign-list", "release-list", "training-run-list"],
    "superuser": ["home", "admin:index", "api-docs", "api-redoc"],
}
SCRIPT = re.compile(r"<script\b([^>]*)>", re.IGNORECASE)
HANDLER = re.compile(r"<[^>]+\son[a-z]+\s*=", re.IGNORECASE)


@pytest.fixture
def clients(client, alice, bob, admin_user):
    from django.test import Client

    made = {"anonymous": client}
    for role, user in (("annotator", bob), ("curator", alice), ("superuser", admin_user)):
        made[role] = Client()
        made[role].force_login(user)
    return made


def directives(header: str) -> dict[str, list[str]]:
    return {part.split()[0]: part.split()[1:] for part in header.split(";") if part.strip()}


@pytest.mark.parametrize("role", PAGES)
def test_every_page_has_the_policy_and_no_inline_script_without_the_nonce(clients, role):
    for name in PAGES[role]:
        response = clients[role].get(reverse(name))
        assert response.status_code == 200, (role, name)
        header = response["Content-Security-Policy"]
        policy = directives(header)
        assert policy["default-src"] == ["'self'"] and policy["object-src"] == ["'none'"], name
        assert policy["img-src"] == ["'self'", "data:"], name
        assert "'unsafe-inline'" not in policy["script-src"] and "'unsafe-eval'" not in policy["script-src"], name
        nonces = [s[len("'nonce-"):-1] for s in policy["script-src"] if s.startswith("'nonce-")]
        html = response.content.decode()
        for attrs in SCRIPT.findall(html):
            if "src=" not in attrs:
                assert nonces and f'nonce="{nonces[0]}"' in attrs, (role, name, attrs)
        assert not HANDLER.search(html), (role, name, HANDLER.search(html))


def test_report_only_mode_sends_the_policy_as_report_only(tmp_path):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "CSP_REPORT_ONLY": "true",
           "DJANGO_SETTINGS_MODULE": "config.settings", "CAPTIONLAB_VAR_DIR": str(tmp_path / "var")}
    code = ("import json, django; django.setup(); from django.conf import settings as s; "
            "print('JSON' + json.dumps([s.CONTENT_SECURITY_POLICY, sorted(s.CONTENT_SECURITY_POLICY_REPORT_ONLY)]))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    line = next(line for line in proc.stdout.splitlines() if line.startswith("JSON"))
    enforced, report_only = json.loads(line[4:])
    assert enforced is None and report_only == ["DIRECTIVES"]
