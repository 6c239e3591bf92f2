#!/usr/bin/env python
"""What the hardening middleware costs an annotator's vote: CPU per request with and without it.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python benchmarks/middleware_cost.py [--votes 600] [--rounds 3] [--db-name NAME]

Issue 25 added four middleware classes to every request: django-csp (a nonce and the header),
the control-character guard (query and form fields), the framed-cookie rewrite for MTurk frames and
django-axes (it only acts on logins, but it is in the chain). This script drives the annotator's
loop in one process, against a scratch PostgreSQL database of its own: fetch the next task and
vote on it through the JSON API (``/api/campaigns/<c>/next/`` and ``.../vote/``), ``--votes``
times, with Django's test client. It alternates the full middleware chain and the chain without
those four, ``--rounds`` times each, and reports the process CPU per vote (fetch + vote; the web
side only, PostgreSQL's own work is the same for both) and the ratio. Aggregation is not run (the
same for both chains). Target: the full chain costs at most 5% more.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.scratch_db import add_scratch_arguments, postgres_base_url, scratch_database  # noqa: E402

HARDENING = (
    "csp.middleware.CSPMiddleware",
    "captionlab.middleware.ControlCharacterMiddleware",
    "captionlab.middleware.FramedSessionCookieMiddleware",
    "axes.middleware.AxesMiddleware",
)
TEXTS = [
    "A red double-decker bus waits at a stop on a rainy street.",
    "Two children fly a kite on a windy beach at sunset.",
    "A bowl of ramen with a soft egg and spring onions.",
    "An old lighthouse on a rocky point under heavy clouds.",
]


def build(votes: int, rounds: int):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from rest_framework.authtoken.models import Token

    from annotation import services
    from curation.models import Caption, Collection, Image

    collection = Collection.objects.create(name="middleware cost")
    n = votes * rounds * 2 + 50
    images = Image.objects.bulk_create([
        Image(collection=collection, sha256=f"{i:064x}", width=640, height=480, format="JPEG",
              external_id=f"mw-{i}", status=Image.Status.READY) for i in range(n)])
    Caption.objects.bulk_create([Caption(image=img, text=TEXTS[i % len(TEXTS)], origin=Caption.Origin.ALT_TEXT)
                                 for i, img in enumerate(images)])
    users = get_user_model()
    curator = users.objects.create_user("mw-curator", password="x" * 12)
    curator.groups.add(Group.objects.get_or_create(name="curator")[0])
    annotator = users.objects.create_user("mw-annotator", password="x" * 12)
    annotator.groups.add(Group.objects.get_or_create(name="annotator")[0])
    campaign = services.campaign_create(name="middleware cost", kind="fluency", selection={"collection": collection.pk},
                                        user=curator, members=[annotator], status="running", votes_per_item=1)
    return campaign, Token.objects.create(user=annotator).key


def loop(campaign, token: str, votes: int, middleware: list[str]) -> float:
    """CPU seconds of ``votes`` fetch+vote pairs with this middleware chain."""
    from django.test import override_settings
    from rest_framework.test import APIClient

    with override_settings(MIDDLEWARE=middleware):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        next_url = f"/api/campaigns/{campaign.pk}/next/"
        client.post(next_url, format="json")  # warm: the chain loads on the first request
        start = time.process_time()
        for _ in range(votes):
            task = client.post(next_url, format="json").json()["task"]
            response = client.post(f"/api/campaigns/{campaign.pk}/tasks/{task['id']}/vote/",
                                   {"value": "fluent", "seconds": 2.0}, format="json")
            assert response.status_code in (200, 201), response.content[:300]
        return time.process_time() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--votes", type=int, default=600, help="fetch+vote pairs per round (default 600)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each chain, alternated (default 3)")
    add_scratch_arguments(parser, "middleware_cost")
    args = parser.parse_args()
    base = postgres_base_url()
    if base is None:
        return 2
    with scratch_database(base, args.db_name, keep=args.keep_db) as scratch:
        os.environ["DATABASE_URL"] = scratch.url
        os.environ.pop("REDIS_URL", None)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        import django

        django.setup()
        from unittest import mock

        from django.conf import settings

        full = list(settings.MIDDLEWARE)
        bare = [m for m in full if m not in HARDENING]
        campaign, token = build(args.votes, args.rounds)
        results = {"full": [], "without": []}
        # Aggregation scheduling is the same for both chains; keep it out of the measurement.
        with mock.patch("annotation.web.annotator.api.schedule_aggregation", lambda *a, **k: None):
            for _ in range(args.rounds):
                results["without"].append(loop(campaign, token, args.votes, bare))
                results["full"].append(loop(campaign, token, args.votes, full))
        per_vote = {k: min(v) / args.votes * 1000 for k, v in results.items()}
        print(f"{args.votes} fetch+vote pairs per round, {args.rounds} rounds each, alternated; best round:")
        print(f"  without the hardening middleware  {per_vote['without']:6.2f} ms CPU per vote")
        print(f"  with it (CSP, control characters, framed cookies, axes)  {per_vote['full']:6.2f} ms CPU per vote")
        ratio = per_vote["full"] / per_vote["without"]
        print(f"  ratio {ratio:.3f}  ->  {'PASS' if ratio <= 1.05 else 'FAIL'} (target <= 1.05)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
