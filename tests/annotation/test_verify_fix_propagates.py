"""A verified fix goes through the run's later steps (issue 24, follow-up): the fixed rewrite of a
hypernymize step is what its later steps (an emoji strip, a length check, a profanity check) decide on,
and what a release built from the run ships, as those steps leave it.

Alice (curator) runs hypernymization with on_uncertain="review", then emoji in strip mode, a length check
and a profanity check, over a lab's first news photos; three rewrites rest on a guess ("Giza" and
"Neuschwanstein" taken for people, "Elon Musk" for a person from the verb alone). Three verifiers verify
them through the real work page: Giza's fix drops the camel that the strip step had taken out, the castle's
fix is typed with an emoji, Musk's fix is too short for the length check."""
import pytest
from django.test import Client

from annotation.aggregation import aggregate_campaign
from annotation.models import Campaign
from curation.models import Caption, Collection, FilterDecision, Review

from ..curation.release_helpers import add_caption, add_image, executed_run
from .test_verify_rewrites import api_create, uncertain, vote_through_the_page

GIZA = "Tourists ride camels near the pyramids of Giza in Egypt 🐪"
CASTLE = "A couple takes a selfie in front of Neuschwanstein in Bavaria."
MUSK = "Elon Musk speaks at a conference."
CERTAIN = ["Kwabena Mensah smiles in front of the Sydney Opera House.",
           "A woman walks her dog along the river in autumn."]
GIZA_FIXED = "tourists ride camels near the pyramids."
CASTLE_TYPED = "🏰 a couple takes a selfie in front of the castle."
CASTLE_SHIPPED = "a couple takes a selfie in front of the castle."
MUSK_FIXED = "a man."  # two words: caption_length (at least three) drops it
EMOJI, LENGTH, PROFANITY = 1, 2, 3  # the steps after hypernymize (step 0)


@pytest.fixture
def run(db):
    """The finished four-step run over five photos: three uncertain rewrites kept for review."""
    collection = Collection.objects.create(name="news desk", source_kind=Collection.SourceKind.WEB_ALT_TEXT)
    for i, text in enumerate([GIZA, CASTLE, MUSK, *CERTAIN]):
        add_caption(add_image(collection, seed=70 + i, external_id=f"news-{i}"), text)
    return executed_run(collection, [
        {"filter": "hypernymize", "params": {"on_uncertain": "review"}},
        {"filter": "emoji", "params": {"mode": "strip"}},
        {"filter": "caption_length", "params": {"min_tokens": 3}},
        {"filter": "profanity"}], name="hypernyms, then the text checks")


def verify(run, alice_client, verifiers, votes, monkeypatch, name="Verify the guesses") -> Campaign:
    """The campaign over the run's uncertain rewrites, voted through the work page, aggregated."""
    monkeypatch.setattr("tests.annotation.test_verify_rewrites.VOTES", votes)
    created = api_create(alice_client, run, name=name, members=[u.username for u in verifiers])
    campaign = Campaign.objects.get(pk=created.json()["id"])
    client = Client()  # the verifiers' browser; alice_client stays Alice's
    for user in verifiers:
        vote_through_the_page(client, user, campaign)
    aggregate_campaign(campaign.pk)
    return campaign


def decision(run, caption_text: str, step: int) -> FilterDecision | None:
    return FilterDecision.objects.filter(run=run, step=step, caption__text=caption_text).first()


def freeze(run, name: str):
    from releases import services as releases

    release = releases.release_create(name, {
        "collections": [run.collection_id], "run": run.pk, "splits": {"train": 1.0, "val": 0.0, "test": 0.0},
        "seed": 1, "dedup": "sha256", "missing_image": "skip"}, None)
    return releases.run_freeze(release.pk)


def state(run) -> tuple:
    """Everything applying verdicts may change: the run's decisions, its captions, reviews, funnel."""
    run.refresh_from_db()
    decisions = sorted(FilterDecision.objects.filter(run=run).values_list(
        "pk", "step", "caption_id", "outcome", "override", "reason", "text_before", "text_after"))
    captions = sorted((c.pk, c.text, c.parent_id, sorted(c.metadata.items()))
                      for c in Caption.objects.filter(origin="transformed"))
    return decisions, captions, Review.objects.count(), run.funnel


FIX_ALL = {  # per annotator (verifier0, 1, 2)
    GIZA: [{"label": "fix", "text": GIZA_FIXED}, {"label": "fix", "text": GIZA_FIXED}, {"label": "keep"}],
    CASTLE: [{"label": "fix", "text": CASTLE_TYPED}, {"label": "fix", "text": CASTLE_TYPED}, {"label": "drop"}],
    MUSK: [{"label": "fix", "text": MUSK_FIXED}, {"label": "fix", "text": MUSK_FIXED}, {"label": "keep"}],
}


def test_the_run_strips_the_camel_from_the_guessed_rewrite_before_anyone_verifies_it(run):
    found = uncertain(run)
    assert set(found) == {GIZA, CASTLE, MUSK}
    stripped = decision(run, GIZA, EMOJI)
    assert stripped.reason == "stripped" and "🐪" in stripped.text_before and "🐪" not in stripped.text_after
    assert Caption.objects.filter(origin="transformed", text=stripped.text_after, metadata__step=EMOJI).exists()


def test_fixes_go_through_the_later_steps_and_the_release_ships_them_as_those_steps_leave_them(
        run, alice_client, verifiers, no_broker, monkeypatch):
    campaign = verify(run, alice_client, verifiers, FIX_ALL, monkeypatch)
    stale_camel = decision(run, GIZA, EMOJI).text_after

    applied = alice_client.post(f"/api/campaigns/{campaign.pk}/apply-verdicts/")
    assert applied.json() == {"keep": 0, "fix": 3, "drop": 0, "unchanged": 0, "no_consensus": 0}

    # Each later step decided again, on the fix.
    giza = decision(run, GIZA, EMOJI)
    assert (giza.reason, giza.text_before, giza.text_after) == ("unchanged", GIZA_FIXED, "")
    castle = decision(run, CASTLE, EMOJI)
    assert (castle.reason, castle.text_before, castle.text_after) == ("stripped", CASTLE_TYPED, CASTLE_SHIPPED)
    assert decision(run, CASTLE, LENGTH).outcome == decision(run, CASTLE, PROFANITY).outcome == "keep"
    musk = decision(run, MUSK, LENGTH)
    assert (musk.outcome, musk.reason) == ("drop", "too_short")
    assert decision(run, MUSK, PROFANITY) is None  # never reached: taken back like any drop's followers

    # The funnel, recounted, says what a release takes.
    run.refresh_from_db()
    assert [(row["entered"], row["dropped"]) for row in run.funnel] == [(5, 0), (5, 0), (5, 1), (4, 0)]
    release = freeze(run, "news v1")
    texts = sorted(release.items.values_list("text", flat=True))
    assert run.funnel[-1]["kept"] == len(texts) == 4
    assert GIZA_FIXED in texts and CASTLE_SHIPPED in texts
    assert not any("🐪" in t or "🏰" in t or "person" in t and "pyramids" in t or t == MUSK_FIXED for t in texts)

    # The camel-stripped caption of the guess stays as a record, no longer the run's.
    stale = Caption.objects.get(origin="transformed", text=stale_camel)
    assert "run" not in stale.metadata and stale.metadata["superseded_in_run"] == run.pk
    shipped = Caption.objects.get(origin="transformed", text=CASTLE_SHIPPED)
    assert [c.text for c in shipped.lineage()] == [CASTLE_SHIPPED, CASTLE_TYPED, CASTLE]


def test_applying_twice_and_the_reconcile_task_after_the_commit_change_nothing(
        run, alice_client, verifiers, no_broker, monkeypatch):
    from curation.pipeline import executor

    campaign = verify(run, alice_client, verifiers, FIX_ALL, monkeypatch)
    alice_client.post(f"/api/campaigns/{campaign.pk}/apply-verdicts/")
    before = state(run)
    again = alice_client.post(f"/api/campaigns/{campaign.pk}/apply-verdicts/")
    assert again.json() == {"keep": 0, "fix": 0, "drop": 0, "unchanged": 3, "no_consensus": 0}
    assert state(run) == before
    executor.reconcile(run.pk, list(run.collection.images.values_list("pk", flat=True)))  # what the task runs
    assert state(run) == before
    assert sorted(freeze(run, "news v2").items.values_list("text", flat=True)) == sorted(
        freeze(run, "news v3").items.values_list("text", flat=True))


def test_a_keep_after_a_fix_restores_the_stripped_guess_through_the_later_steps(
        run, alice_client, verifiers, no_broker, monkeypatch):
    guessed = decision(run, GIZA, EMOJI)
    first = verify(run, alice_client, verifiers, FIX_ALL, monkeypatch)
    alice_client.post(f"/api/campaigns/{first.pk}/apply-verdicts/")
    keep_all = {text: [{"label": "keep"}] * 3 for text in FIX_ALL}
    second = verify(run, alice_client, verifiers, keep_all, monkeypatch, name="Verify again")
    applied = alice_client.post(f"/api/campaigns/{second.pk}/apply-verdicts/")
    assert applied.json() == {"keep": 3, "fix": 0, "drop": 0, "unchanged": 0, "no_consensus": 0}

    giza = decision(run, GIZA, EMOJI)
    assert (giza.reason, giza.text_before, giza.text_after) == ("stripped", guessed.text_before, guessed.text_after)
    assert decision(run, MUSK, LENGTH).outcome == "keep" and decision(run, MUSK, PROFANITY) is not None
    run.refresh_from_db()
    texts = sorted(freeze(run, "news kept").items.values_list("text", flat=True))
    assert run.funnel[-1]["kept"] == len(texts) == 5
    assert guessed.text_after in texts and "person speaks at a conference." in texts
    # The stripped guess's caption, superseded by the fix, is the run's again (not made twice).
    assert Caption.objects.filter(origin="transformed", text=guessed.text_after, metadata__run=run.pk).count() == 1


def test_a_drop_verdict_takes_back_the_later_decisions_at_once_and_reviewed_later_decisions_stay(
        run, alice_client, verifiers, no_broker, monkeypatch):
    from curation.services import decision_override

    # Before the verdicts, Alice checked Musk's length decision and the castle's emoji decision and kept
    # them: her word stays.
    reviewed = decision(run, MUSK, LENGTH)
    decision_override(decision=reviewed, outcome="keep", note="short is fine here")
    no_emoji = decision(run, CASTLE, EMOJI)
    decision_override(decision=no_emoji, outcome="keep", note="no emoji")
    votes = {GIZA: [{"label": "drop"}] * 3, CASTLE: FIX_ALL[CASTLE], MUSK: FIX_ALL[MUSK]}
    campaign = verify(run, alice_client, verifiers, votes, monkeypatch)
    applied = alice_client.post(f"/api/campaigns/{campaign.pk}/apply-verdicts/")
    assert applied.json() == {"keep": 0, "fix": 2, "drop": 1, "unchanged": 0, "no_consensus": 0}

    assert [decision(run, GIZA, step) for step in (EMOJI, LENGTH, PROFANITY)] == [None, None, None]
    musk = decision(run, MUSK, LENGTH)
    assert (musk.pk, musk.outcome, musk.score, musk.override) == (reviewed.pk, "keep", reviewed.score, "")
    assert decision(run, MUSK, PROFANITY).outcome == "keep"  # reached: the curator kept it at the length step
    castle = decision(run, CASTLE, EMOJI)
    assert (castle.pk, castle.reason, castle.text_before) == (no_emoji.pk, "unchanged", no_emoji.text_before)
    run.refresh_from_db()
    assert [(row["entered"], row["dropped"]) for row in run.funnel] == [(5, 1), (4, 0), (4, 0), (4, 0)]
    texts = sorted(freeze(run, "news v1").items.values_list("text", flat=True))
    assert run.funnel[-1]["kept"] == len(texts) == 4
    # The reviewed emoji decision kept its outcome and its record, and the step still stripped the fix.
    assert MUSK_FIXED in texts and CASTLE_SHIPPED in texts and not any("pyramids" in t for t in texts)

