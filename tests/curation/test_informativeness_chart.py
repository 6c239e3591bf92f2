"""The informativeness step's what-if histogram draws the cut its decisions were made at. The step keeps
the min_rho_percentile-th percentile of the fitted corpus (seed 000, Section 3: the paper's rho >= 20
kept about 45% of AVA), so its ``min_rho`` parameter is empty by default; each decision records the rho
it was compared with (``min_rho_used``), and the chart's lower line is that value, labelled as the
percentile cut. Comments come from the critique generator, not from the paper."""
import re

import pytest
from django.urls import reverse

from curation import charts
from curation.models import Caption, Collection, FilterDecision, Image, Pipeline, RunChunk
from curation.pipeline import executor
from curation.services import run_create

from .comment_corpus import corpus

pytestmark = pytest.mark.django_db


@pytest.fixture
def run():
    """Priya's photo club: 160 comments on 40 photos, run through informativeness with its defaults."""
    collection = Collection.objects.create(name="Photo club critiques", language="en")
    comments = corpus(160, seed=11)
    for i in range(40):
        image = Image.objects.create(collection=collection, external_id=f"photo-{i}", width=640, height=480,
                                     format="JPEG", sha256=f"{i:064x}", status="ready")
        for k in range(i * 4, (i + 1) * 4):  # the same "Great shot!" twice on one photo: two comments
            Caption.objects.create(image=image, text=comments[k], origin=Caption.Origin.WEB_COMMENT, language="en",
                                   source=f"comments.json#{k}")
    pipeline = Pipeline.objects.create(name="informative comments", steps=[{"filter": "informativeness"}])
    run = run_create(collection=collection, pipeline=pipeline, enqueue=False)
    executor.start(run.pk, enqueue=lambda run_id, index: None)
    for chunk in RunChunk.objects.filter(run=run):
        executor.run_chunk(run.pk, chunk.index)
    run.refresh_from_db()
    assert run.status == "done", run.error
    return run


def used_cut(run) -> float:
    values = set(FilterDecision.objects.filter(run=run, step=0, score__isnull=False)
                 .values_list("details__min_rho_used", flat=True))
    assert len(values) == 1, values  # one fitted corpus, one cut for every decision
    return values.pop()


def test_the_chart_draws_the_percentile_cut_the_decisions_were_made_at(alice_client, run):
    assert run.snapshot[0]["params"]["min_rho"] is None and run.snapshot[0]["params"]["min_rho_percentile"] == 55
    cut = used_cut(run)
    html = alice_client.get(reverse("run-step", args=[run.pk, 0])).content.decode()
    line = re.search(r'<line class="threshold" data-name="min_rho" data-value="([^"]+)" '
                     r'data-note="55th percentile cut"', html)
    assert line and float(line.group(1)) == pytest.approx(cut)
    assert "min_rho = " in html and "(55th percentile cut" in html
    assert 'name="th_min_rho"' in html  # and the curator can move it to see what would change
    decisions = FilterDecision.objects.filter(run=run, step=0, score__isnull=False)
    assert decisions.filter(reason="uninformative").exists() and decisions.filter(outcome="keep").exists()
    assert all(score < cut for score in decisions.filter(reason="uninformative").values_list("score", flat=True))
    assert all(score >= cut for score in decisions.filter(outcome="keep").values_list("score", flat=True))


def test_the_what_if_starts_from_the_cut_used(alice_client, run):
    cut = used_cut(run)
    url = reverse("run-step-histogram", args=[run.pk, 0])
    html = alice_client.get(url, {"th_min_rho": repr(cut)}, HTTP_HX_REQUEST="true").content.decode()
    assert "Change a threshold to see how many decisions would change." in html  # the cut now: nothing changes
    lower = cut - 5
    would_keep = FilterDecision.objects.filter(run=run, step=0, reason="uninformative", score__gte=lower).count()
    assert would_keep
    html = alice_client.get(url, {"th_min_rho": str(lower)}, HTTP_HX_REQUEST="true").content.decode()
    assert f'<strong data-role="to-keep">{would_keep}</strong>' in html
    assert re.search(r'<line class="threshold proposed" data-name="min_rho"', html)


def test_a_floor_set_by_hand_that_decided_is_drawn_without_the_percentile_note(run):
    decisions = FilterDecision.objects.filter(run=run, step=0)
    cut = used_cut(run)
    params = dict(run.snapshot[0]["params"])
    names = ("min_rho", "max_rho")
    found, notes = charts.thresholds_used(params, names, decisions)
    assert found == {"min_rho": cut, "max_rho": 120.0} and notes == {"min_rho": "55th percentile cut"}
    found, notes = charts.thresholds_used({**params, "min_rho": cut}, names, decisions)
    assert found["min_rho"] == cut and notes == {}  # the hand-set floor was the higher one: no percentile note
    found, notes = charts.thresholds_used({**params, "min_rho_percentile": None}, names, decisions)
    assert found["min_rho"] == cut and notes == {"min_rho": "computed when run"}
    found, notes = charts.thresholds_used(params, names, decisions.none())  # nothing recorded: the parameters
    assert found == {"max_rho": 120.0} and notes == {}


@pytest.mark.parametrize("value, text", [(55, "55th"), (1, "1st"), (22, "22nd"), (3, "3rd"), (11, "11th"),
                                         (12.5, "12.5th")])
def test_percentiles_read_as_ordinals(value, text):
    assert charts.ordinal(value) == text
