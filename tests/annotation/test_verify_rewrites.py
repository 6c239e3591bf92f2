"""Verify-rewrite campaigns (issue 24): hypernymization's uncertain rewrites go to annotators, who keep,
fix or drop them on the work page, and their verdicts go back onto the run's decisions and into the
release built from the run.

Alice (curator) runs hypernymization with on_uncertain="review" over a lab's first news and stock photos;
three rewrites rest on a guess: "Giza" and "Neuschwanstein" were taken for people, "Elon Musk" for a
person from the verb alone. Three annotators verify them through the real work page."""
import re

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from annotation.aggregation import aggregate_campaign
from annotation.models import Campaign, Task, Vote
from curation.models import Caption, FilterDecision, Review

from ..curation.release_helpers import finished_run, news_desk, review_guesses_run

GIZA = "Tourists ride camels near the pyramids of Giza in Egypt."
CASTLE = "A couple takes a selfie in front of Neuschwanstein in Bavaria."
MUSK = "Elon Musk speaks at a conference."
CERTAIN = ["Kwabena Mensah smiles in front of the Sydney Opera House.",
           "A woman walks her dog along the river in autumn."]
GIZA_FIXED = "tourists ride camels near the pyramids."


@pytest.fixture
def run(db):
    """The finished run over five photos with real image files: three uncertain rewrites kept for review."""
    return review_guesses_run(news_desk([GIZA, CASTLE, MUSK, *CERTAIN], seed0=70, prefix="news"))


def uncertain(run) -> dict[str, FilterDecision]:
    return {d.caption.text: d for d in FilterDecision.objects.filter(run=run, reason="uncertain_rewrite")
            .select_related("caption")}


def api_create(client, source_run, **extra):
    run = source_run
    body = {"name": "Verify the guesses", "kind": "verify_rewrite", "collection": run.collection_id, "run": run.pk,
            "step": 0, "reason": "uncertain_rewrite", "status": "running", **extra}
    return client.post("/api/campaigns/", body, content_type="application/json")


# --- the run and the way from its step page to a campaign ------------------------------------------------

def test_a_review_run_keeps_guessed_rewrites_with_the_reason_uncertain_rewrite(run):
    found = uncertain(run)
    assert set(found) == {GIZA, CASTLE, MUSK}
    assert found[GIZA].text_after == "tourists ride camels near the pyramids of person."
    assert all(d.outcome == "keep" and d.details["uncertain"] for d in found.values())


def test_the_step_page_offers_to_verify_the_uncertain_rewrites_with_a_prefilled_form(run, alice_client):
    page = alice_client.get(reverse("run-step", args=[run.pk, 0])).content.decode()
    link = re.search(r'href="([^"]+)" data-role="verify-rewrites">Verify 3 uncertain rewrites with annotators', page)
    assert link, "no verify link on the hypernymize step"
    form = alice_client.get(link.group(1).replace("&amp;", "&")).content.decode()
    assert re.search(r'value="verify_rewrite"[^>]*checked', form)
    assert 'value="uncertain_rewrite"' in form
    assert f'data-run="{run.pk}" selected' in form


def test_a_verify_campaign_is_created_from_the_form_with_one_task_per_uncertain_rewrite(run, alice_client,
                                                                                     verifiers):
    response = alice_client.post(reverse("campaign-create"), {
        "name": "Verify from the form", "kind": "verify_rewrite", "collection": run.collection_id, "run": run.pk,
        "step": 0, "reason": "uncertain_rewrite", "members": [u.pk for u in verifiers], "start": "on",
        "priority": "order", "backend": "inhouse", "seed": 0})
    assert response.status_code == 302, response.content.decode()[:3000]
    campaign = Campaign.objects.get(name="Verify from the form")
    assert campaign.selection["reason"] == "uncertain_rewrite"
    by_decision = {d.pk: text for text, d in uncertain(run).items()}
    assert {t.source_decision: t.caption.text for t in campaign.tasks.all()} == by_decision


def test_the_api_creates_a_verify_campaign_and_refuses_a_selection_it_cannot_verify(run, alice_client):
    created = api_create(alice_client, run)
    assert created.status_code == 201, created.content
    assert Campaign.objects.get(pk=created.json()["id"]).tasks.count() == 3

    no_run = api_create(alice_client, run, name="no run", run=None, step=None, reason="")
    assert no_run.status_code == 400 and "needs a filter run" in no_run.json()["run"][0]
    reason_alone = api_create(alice_client, run, name="reason alone", kind="quality", run=None, step=None)
    assert reason_alone.status_code == 400 and "needs a filter run and a step" in reason_alone.json()["reason"][0]
    nothing = api_create(alice_client, run, name="no such reason", reason="too_short")
    assert nothing.status_code == 400 and "has the reason 'too_short'" in nothing.json()["reason"][0]
    # A run whose step 1 is the alt-text quality filter, not hypernymize.
    other = finished_run(run.collection)
    wrong = api_create(alice_client, run, name="wrong step", run=other.pk, step=1)
    assert wrong.status_code == 400 and "'alt_text_quality'" in wrong.json()["step"][0]
    assert Campaign.objects.count() == 1


# --- voting on the work page and applying the verdicts ----------------------------------------------------

CASTLE_FIXED = "a couple takes a selfie in front of the castle."
VOTES = {  # per annotator (verifier0, 1, 2): the answer for each caption
    GIZA: [{"label": "fix", "text": GIZA_FIXED}, {"label": "fix", "text": f"  {GIZA_FIXED} "}, {"label": "keep"}],
    CASTLE: [{"label": "drop"}, {"label": "drop"}, {"label": "fix", "text": CASTLE_FIXED}],
    MUSK: [{"label": "keep"}, {"label": "keep"}, {"label": "keep"}],
}


def vote_through_the_page(client, user, campaign, n: int = 3):
    client.force_login(user)
    index = int(user.username[-1])
    for _ in range(n):
        page = client.get(reverse("annotate", args=[campaign.pk]))
        html = page.content.decode()
        task_id = int(re.search(r'name="task" value="(\d+)"', html).group(1))
        task = Task.objects.select_related("caption").get(pk=task_id)
        assert 'data-role="uncertain-mention"' in html and 'data-role="rewrite"' in html
        answer = VOTES[task.caption.text][index]
        response = client.post(reverse("annotate-submit", args=[campaign.pk]), {"task": task_id, **answer})
        assert response.status_code == 302, response.content.decode()[:2000]


def test_the_work_page_shows_the_guess_and_refuses_a_fix_without_text_or_an_unknown_answer(
        run, alice_client, verifiers, no_broker):
    campaign = Campaign.objects.get(pk=api_create(alice_client, run, members=[u.username for u in verifiers])
                                    .json()["id"])
    client = Client()  # the verifiers' browser; alice_client stays Alice's
    client.force_login(verifiers[0])
    page = client.get(reverse("annotate", args=[campaign.pk])).content.decode()
    task_id = int(re.search(r'name="task" value="(\d+)"', page).group(1))
    task = Task.objects.select_related("caption").get(pk=task_id)
    assert task.caption.text == GIZA  # the tasks come in order
    assert '<mark data-role="uncertain-mention">Giza</mark>' in page
    assert "near the pyramids of person." in page and "labelled a person" in page
    assert re.search(r'data-key="2"[^>]*>\s*<kbd>2</kbd><span>Fix', page)

    submit = reverse("annotate-submit", args=[campaign.pk])
    empty = client.post(submit, {"task": task_id, "label": "fix", "text": "   "}, HTTP_HX_REQUEST="true")
    assert empty.status_code == 400
    assert "Fix needs the corrected rewrite" in empty.content.decode()
    unknown = client.post(submit, {"task": task_id, "label": "maybe", "text": ""}, HTTP_HX_REQUEST="true")
    assert unknown.status_code == 400 and "&#x27;maybe&#x27; is not one of this campaign&#x27;s answers" in \
        unknown.content.decode()
    gibberish = client.post(submit, {"task": task_id, "label": "fix", "text": "asdf asdf asdf asdf"},
                            HTTP_HX_REQUEST="true")
    assert gibberish.status_code == 400 and "asdf asdf asdf asdf" in gibberish.content.decode()  # kept to fix
    assert not Vote.objects.exists()
    again = client.get(reverse("annotate", args=[campaign.pk])).content.decode()
    assert f'name="task" value="{task_id}"' in again  # still held: nothing lost

    api = client.post(f"/api/campaigns/{campaign.pk}/tasks/{task_id}/vote/", {"value": {"label": "fix"}},
                      content_type="application/json")
    assert api.status_code == 400 and "Fix needs the corrected rewrite" in api.content.decode()
    assert not Vote.objects.exists()


def test_verdicts_from_the_work_page_go_onto_the_decisions_and_the_release_ships_the_fixed_text(
        run, alice_client, verifiers, no_broker):
    from releases import services as releases

    campaign = Campaign.objects.get(pk=api_create(alice_client, run, members=[u.username for u in verifiers])
                                    .json()["id"])
    client = Client()  # the verifiers' browser; alice_client stays Alice's
    for user in verifiers:
        vote_through_the_page(client, user, campaign)
    assert Vote.objects.filter(campaign=campaign).count() == 9
    assert Vote.objects.filter(campaign=campaign, value__text=GIZA_FIXED).count() == 2  # spaces tidied
    aggregate_campaign(campaign.pk)

    applied = alice_client.post(f"/api/campaigns/{campaign.pk}/apply-verdicts/")
    assert applied.status_code == 200, applied.content
    assert applied.json() == {"keep": 1, "fix": 1, "drop": 1, "unchanged": 0, "no_consensus": 0}

    found = uncertain(run)
    giza, castle, musk = found[GIZA], found[CASTLE], found[MUSK]
    assert (giza.final_outcome, giza.text_after) == ("keep", GIZA_FIXED)
    assert giza.details["verified"] == {"campaign": campaign.pk, "votes": {"fix": 2, "keep": 1}, "label": "fix",
                                        "original_rewrite": "tourists ride camels near the pyramids of person."}
    assert (castle.override, castle.final_outcome) == ("drop", "drop")
    assert musk.final_outcome == "keep" and musk.text_after == "person speaks at a conference."
    assert Review.objects.filter(decision=castle, outcome="drop", note__contains=f"#{campaign.pk}").count() == 1
    assert Review.objects.filter(outcome="keep").count() == 2  # Giza (fixed) and Musk: who verified them
    run.refresh_from_db()
    assert (run.funnel[0]["kept"], run.funnel[0]["dropped"]) == (4, 1)  # recounted with the override

    again = alice_client.post(f"/api/campaigns/{campaign.pk}/apply-verdicts/")
    assert again.json() == {"keep": 0, "fix": 0, "drop": 0, "unchanged": 3, "no_consensus": 0}
    assert Review.objects.count() == 3

    release = releases.release_create("news v1", {
        "collections": [run.collection_id], "run": run.pk, "splits": {"train": 1.0, "val": 0.0, "test": 0.0},
        "seed": 1, "dedup": "sha256", "missing_image": "skip"}, None)
    release = releases.run_freeze(release.pk)
    texts = set(release.items.values_list("text", flat=True))
    assert GIZA_FIXED in texts and "person speaks at a conference." in texts
    assert not any("pyramids of person" in t or "selfie" in t for t in texts)
    assert Caption.objects.filter(text=GIZA_FIXED, origin="transformed", parent__text=GIZA).count() == 1


def test_the_campaign_page_button_and_the_command_apply_the_same_verdicts(run, alice_client, verifiers, no_broker,
                                                                        capsys):
    campaign = Campaign.objects.get(pk=api_create(alice_client, run, members=[u.username for u in verifiers])
                                    .json()["id"])
    client = Client()  # the verifiers' browser; alice_client stays Alice's
    detail = alice_client.get(reverse("campaign-detail", args=[campaign.pk])).content.decode()
    assert 'data-role="apply-verdicts"' in detail
    refused = alice_client.post(reverse("campaign-apply-verdicts", args=[campaign.pk]), follow=True)
    assert "aggregate" in refused.content.decode().lower()
    assert FilterDecision.objects.filter(run=run, details__has_key="verified").count() == 0

    for user in verifiers:
        vote_through_the_page(client, user, campaign)
    aggregate_campaign(campaign.pk)
    done = alice_client.post(reverse("campaign-apply-verdicts", args=[campaign.pk]), follow=True)
    assert "1 kept, 1 fixed, 1 dropped" in done.content.decode()
    call_command("campaign", "apply-verdicts", str(campaign.pk))
    assert "0 kept, 0 fixed, 0 dropped, 3 already as verified" in capsys.readouterr().out



def test_only_curators_apply_verdicts_and_only_of_a_verify_campaign(run, alice_client, verifiers, make_campaign):
    campaign = Campaign.objects.get(pk=api_create(alice_client, run, members=[u.username for u in verifiers])
                                    .json()["id"])
    quality = make_campaign("quality")
    wrong = alice_client.post(f"/api/campaigns/{quality.pk}/apply-verdicts/")
    assert wrong.status_code == 400 and "Only a verify-rewrite campaign" in wrong.content.decode()
    assert alice_client.post("/api/campaigns/99999/apply-verdicts/").status_code == 404
    annotator = Client()
    annotator.force_login(verifiers[0])
    assert annotator.post(f"/api/campaigns/{campaign.pk}/apply-verdicts/").status_code == 403
    assert annotator.post(reverse("campaign-apply-verdicts", args=[campaign.pk])).status_code == 403
    assert not Review.objects.exists()
