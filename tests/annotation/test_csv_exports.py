"""Every CSV the platform writes goes through one writer (captionlab.csv_safe) and no cell of any export
runs as a formula in a spreadsheet (issue 25): annotator-written =HYPERLINK(...), @SUM(...), +cmd|...
come out with a leading apostrophe in export.csv (votes and aggregates), batch-results.csv, the
marketplace files and ``campaign export-votes``. Release CSVs are covered in test_release_formats."""
import csv
import io
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation import batch_csv
from annotation.models import Aggregate, Assignment, Vote
from captionlab.csv_safe import RISKY, neutralise, to_text

from .conftest import make_collection
from .test_batch_csv import batch, photos, row

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
FORMULAS = ['=HYPERLINK("http://evil.example/x","click")', "@SUM(A1:A9)", "+cmd|' /C calc'!A0", "-2+3+cmd|x"]
# Files that write CSV without the one writer, and why.
NOT_EXPORTS = {"curation/demo.py": "the demo's sidecar is an import's input, written from fixed captions"}


def test_the_writer_neutralises_formula_cells_and_leaves_numbers_and_plain_text():
    for formula in FORMULAS + ["\tindented", "\rreturn"]:
        assert neutralise(formula) == "'" + formula
    assert [neutralise(v) for v in ("-3", "+1.5", "2e-3", 7, None, "a cat")] == ["-3", "+1.5", "2e-3", 7, None, "a cat"]
    assert to_text([["=1+1", "-1"]], lineterminator="\n") == "'=1+1,-1\n"


def test_no_module_writes_csv_but_the_one_writer():
    pattern = re.compile(r"\b_?csv\.(writer|DictWriter)\(")
    offenders = []
    for package in ("annotation", "captionlab", "config", "curation", "modeling"):
        for path in (ROOT / package).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if rel != "captionlab/csv_safe.py" and rel not in NOT_EXPORTS and pattern.search(path.read_text()):
                offenders.append(rel)
    assert offenders == [], "write CSV through captionlab.csv_safe"


def _cells(text: str) -> set[str]:
    return {cell for r in csv.reader(io.StringIO(text, newline="")) for cell in r}


def _live_formulas(text: str) -> list[str]:
    return [c for c in _cells(text) if c.startswith(RISKY) and neutralise(c) != c]


def test_every_campaign_csv_export_neutralises_annotator_written_formulas(make_campaign, alice_client, tmp_path):
    collection = make_collection(name="formula photos")
    photos(collection)
    campaign = make_campaign("write", collection=collection, votes_per_item=2, text_max_chars=300)
    report = batch_csv.import_batch(campaign, batch([
        row("H1", "A1", "WORKER1", "Approved", 0, FORMULAS[0], FORMULAS[1]),
        row("H2", "A2", "WORKER2", "Rejected", 1, FORMULAS[2], FORMULAS[3]),
    ]))
    assert report.problems == [] and report.imported == 2
    Assignment.objects.filter(provider_assignment_id="A2").update(feedback=FORMULAS[0])
    vote = Vote.objects.filter(campaign=campaign).first()
    Aggregate.objects.create(task=vote.task, method="majority", label=FORMULAS[1], confidence=1.0, n_votes=1)

    exports = {}
    for table in ("votes", "aggregates"):
        response = alice_client.get(reverse("campaign-export", args=[campaign.pk]), {"table": table})
        exports[f"export.csv {table}"] = b"".join(response.streaming_content).decode()
    exports["batch-results.csv"] = alice_client.get(reverse("batch-export", args=[campaign.pk])).content.decode()
    for kind in ("approvals", "rejections", "bonuses"):
        exports[kind] = alice_client.get(reverse("provider-export", args=[campaign.pk, kind])).content.decode()
    out = tmp_path / "votes.csv"
    call_command("campaign", "export-votes", str(campaign.pk), "--out", str(out), stdout=io.StringIO())
    exports["campaign export-votes"] = out.read_text(encoding="utf-8")

    for name, text in exports.items():
        assert _live_formulas(text) == [], name
    assert {"'" + f for f in FORMULAS} <= _cells(exports["batch-results.csv"])
    assert {"'" + FORMULAS[0], "'" + FORMULAS[2]} <= _cells(exports["export.csv votes"])
    assert "'" + FORMULAS[1] in _cells(exports["export.csv aggregates"])
    assert "'" + FORMULAS[0] in _cells(exports["rejections"])
