"""The curator's crowd controls (provider, reward, budget, places, provider settings, review rules)
from the create form, the crowd settings page, the API and the command, with the same refusals
everywhere; Mechanical Turk offered as closed; the ledger page and the read-only ledger admin;
link-out places enforced, also against simultaneous participants on PostgreSQL.

Alice curates, Bob annotates, Carol administers."""
import io
import re
import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Assignment, Campaign, LedgerEntry
from annotation.providers import controls, money
from annotation.services import CampaignError

from .test_campaign_pages import form_data

pytestmark = pytest.mark.django_db
URL = "https://app.prolific.com/submissions/complete?cc={code}"


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def api(alice):
    client = APIClient()
    client.force_authenticate(alice)
    return client


def run(*args) -> str:
    out = io.StringIO()
    call_command("campaign", *args, stdout=out)
    return out.getvalue()


# --- setting them ------------------------------------------------------------------------------------


def test_alice_sets_provider_reward_budget_places_and_rules_in_the_create_form(alice_client, collection):
    page = alice_client.get(reverse("campaign-create")).content.decode()
    assert "closed by Amazon since 2026-09-30" in page  # the MTurk choice and the note under it
    response = alice_client.post(reverse("campaign-create"), form_data(
        collection, backend="linkout", reward="1.50", budget="60.00", places="20", auto_approve="on",
        provider_config='{"completion_code": "C0DE1234", "completion_url": "%s", "tasks_per_assignment": 5}' % URL,
        min_gold_accuracy="0.5", block_below_gold_accuracy="0.6", block_min_gold="4"))
    assert response.status_code == 302, response.content.decode()[:3000]
    campaign = Campaign.objects.get()
    assert (campaign.backend, campaign.reward_cents, campaign.budget_cents) == ("linkout", 150, 6000)
    assert campaign.provider_config == {
        "completion_code": "C0DE1234", "completion_url": URL, "tasks_per_assignment": 5, "places": 20,
        "review": {"auto_approve": True, "min_gold_accuracy": 0.5, "block_below_gold_accuracy": 0.6,
                   "block_min_gold": 4}}


@pytest.mark.parametrize("change,message", [
    ({"backend": "mturk", "reward": "0"}, "Mechanical Turk needs a reward above 0"),
    ({"backend": "linkout", "reward": "-1"}, "The reward cannot be negative."),
    ({"backend": "linkout", "reward": "1.00", "budget": "0.50"}, "does not cover the first publication"),
    ({"backend": "mturk", "reward": "0.10", "budget": "0.20"}, "one HIT of 2 assignments"),
    ({"backend": "linkout", "places": "-3"}, "Places cannot be negative."),
    ({"backend": "inhouse", "places": "5"}, "Places count link-out participants"),
    ({"backend": "linkout", "budget": "99999999"}, "The budget of 99,999,999.00 is more than the 1,000,000.00 allowed."),
    ({"provider_config": "[1, 2]"}, "must be a JSON object"),
    ({"provider_config": "{oops"}, "not valid JSON"),
    ({"provider_config": '{"placse": 3}'}, "Unknown provider setting 'placse'"),
    ({"backend": "linkout", "provider_config": '{"completion_url": "http://x.org"}'}, "https://"),
    ({"block_below_gold_accuracy": "1.5"}, "must be a share between 0 and 1"),
    ({"block_min_gold": "0"}, "must be between 1 and 10,000"),
    ({"backend": "fax"}, "Unknown crowd provider"),
])
def test_the_create_form_refuses_absurd_values_with_a_message(alice_client, collection, change, message):
    response = alice_client.post(reverse("campaign-create"), form_data(collection, **change))
    body = response.content.decode()
    assert response.status_code == 400 and message in body.replace("&#x27;", "'"), body[:4000]
    assert not Campaign.objects.exists()


def test_the_crowd_page_changes_the_controls_and_guards_a_launched_campaign(alice_client, make_campaign):
    campaign = make_campaign("fluency", status="draft")
    url = reverse("campaign-crowd", args=[campaign.pk])
    assert 'data-role="save-crowd"' in alice_client.get(url).content.decode()
    data = {"backend": "mturk", "reward": "0.12", "budget": "20", "provider_config": '{"max_assignments": 3}',
            "auto_approve": "", "block_below_gold_accuracy": "0.7", "block_min_gold": "5"}
    assert alice_client.post(url, data).status_code == 302
    campaign.refresh_from_db()
    assert (campaign.backend, campaign.reward_cents, campaign.budget_cents) == ("mturk", 12, 2000)
    assert campaign.provider_config["review"] == {"auto_approve": False, "block_below_gold_accuracy": 0.7,
                                                  "block_min_gold": 5}
    for page in (alice_client.get(url), alice_client.get(reverse("campaign-detail", args=[campaign.pk])),
                 alice_client.get(reverse("campaign-provider", args=[campaign.pk]))):
        body = page.content.decode()
        assert 'data-role="provider-note"' in body and "closed by Amazon since 2026-09-30" in body
    # money committed: the reward is fixed and the budget cannot drop below it
    money.commit(campaign, "mturk", "reward", 36, "mturk-hit-1:reward", note="one HIT")
    money.commit(campaign, "mturk", "reward", 36, "mturk-hit-2:reward", note="another HIT")  # 2 x (36 + 7 fee)
    response = alice_client.post(url, {**data, "reward": "0.20"})
    assert response.status_code == 400 and "The reward cannot change after launch" in response.content.decode()
    response = alice_client.post(url, {**data, "budget": "0.50"})
    assert response.status_code == 400 and "cannot go below the 0.86 already committed" in response.content.decode()
    response = alice_client.post(url, {**data, "backend": "linkout"})
    assert response.status_code == 400 and "The provider cannot change" in response.content.decode()
    # removing a rule: the empty field takes it away
    assert alice_client.post(url, {**data, "block_below_gold_accuracy": ""}).status_code == 302
    campaign.refresh_from_db()
    assert "block_below_gold_accuracy" not in campaign.provider_config["review"]


def test_the_api_takes_and_shows_the_controls_and_refuses_bad_ones(api, collection, bob):
    body = {"name": "Paid fluency", "kind": "fluency", "collection": collection.pk, "backend": "mturk",
            "reward_cents": 10, "budget_cents": 500, "provider_config": {"tasks_per_assignment": 4},
            "review": {"auto_approve": True, "block_below_gold_accuracy": 0.5}}
    response = api.post("/api/campaigns/", body, format="json")
    assert response.status_code == 201, response.content
    data = response.json()
    assert (data["backend"], data["reward_cents"], data["budget_cents"]) == ("mturk", 10, 500)
    assert data["provider_config"] == {"tasks_per_assignment": 4,
                                       "review": {"auto_approve": True, "block_below_gold_accuracy": 0.5}}
    assert "closed by Amazon since 2026-09-30" in data["provider_note"]
    url = f"/api/campaigns/{data['id']}/"
    response = api.patch(url, {"budget_cents": 900, "review": {"block_min_gold": 6}}, format="json")
    assert response.status_code == 200, response.content
    campaign = Campaign.objects.get(pk=data["id"])
    assert campaign.budget_cents == 900 and campaign.provider_config["review"] == {
        "auto_approve": True, "block_below_gold_accuracy": 0.5, "block_min_gold": 6}
    for change, field, message in [
        ({"reward_cents": 0}, "reward_cents", "Mechanical Turk needs a reward above 0"),
        ({"reward_cents": -5}, "reward_cents", "greater than or equal to 0"),
        ({"budget_cents": 5}, "budget_cents", "does not cover the first publication"),
        ({"backend": "pigeon"}, "backend", "is not a valid choice"),
        ({"provider_config": {"lifetime_seconds": 5}}, "provider_config", "between 30 and"),
        ({"review": {"auto_approve": "sometimes"}}, "review", "Auto-approve must be true or false."),
    ]:
        response = api.patch(url, change, format="json")
        assert response.status_code == 400, (change, response.content)
        assert message in " ".join(response.json()[field]), response.json()
    assert Campaign.objects.get(pk=data["id"]).reward_cents == 10
    # an annotator never sees them
    bob_api = APIClient()
    bob_api.force_authenticate(bob)
    assert bob_api.patch(url, {"budget_cents": 1}, format="json").status_code == 403
    # the schema says MTurk is closed
    schema = api.get("/api/schema/").content.decode()
    assert "closed by Amazon since 2026-09-30" in schema


def test_the_command_sets_the_controls_and_refuses_bad_ones(collection):
    out = run("create", "--name", "CLI paid", "--kind", "fluency", "--collection", str(collection.pk),
              "--provider", "linkout", "--reward-cents", "150", "--budget-cents", "6000", "--places", "10",
              "--provider-config", '{"completion_code": "C0DE1234"}', "--block-below-gold-accuracy", "0.6",
              "--block-min-gold", "4")
    campaign = Campaign.objects.get(name="CLI paid")
    assert (campaign.backend, campaign.reward_cents, campaign.budget_cents) == ("linkout", 150, 6000)
    assert campaign.provider_config["places"] == 10 and campaign.provider_config["review"]["block_min_gold"] == 4
    assert "provider linkout, reward 150 cents, budget 6000 cents, 10 places" in out
    out = run("crowd", str(campaign.pk), "--budget-cents", "9000", "--no-auto-approve")
    campaign.refresh_from_db()
    assert campaign.budget_cents == 9000 and campaign.provider_config["review"]["auto_approve"] is False
    assert "every submission held for review" in out
    with pytest.raises(CommandError, match=r"does not cover the first publication.*\(--budget-cents\)"):
        run("crowd", str(campaign.pk), "--budget-cents", "100")
    with pytest.raises(CommandError, match=r"Mechanical Turk needs a reward above 0.*\(--reward-cents\)"):
        run("create", "--name", "free turk", "--kind", "fluency", "--collection", str(collection.pk),
            "--provider", "mturk")
    with pytest.raises(CommandError, match="not valid JSON"):
        run("crowd", str(campaign.pk), "--provider-config", "{nope")
    assert not Campaign.objects.filter(name="free turk").exists()
    out = run("crowd", str(campaign.pk), "--provider", "mturk", "--reward-cents", "20", "--places", "0")
    assert "closed by Amazon since 2026-09-30" in out


def test_the_command_help_marks_mechanical_turk_closed(capsys):
    with pytest.raises(SystemExit):
        call_command("campaign", "create", "--help")
    assert "closed by Amazon since 2026-09-30" in re.sub(r"\s+", " ", capsys.readouterr().out)


def test_the_controls_are_one_validation():
    with pytest.raises(CampaignError) as error:
        controls.clean_controls({"backend": "linkout", "reward_cents": 100, "places": 10, "budget_cents": 1000})
    assert error.value.field == "budget_cents" and "10 places x 1.00" in error.value.message
    clean = controls.clean_controls({"backend": "linkout", "reward_cents": 100, "places": 10, "budget_cents": 1400,
                                     "provider_config": {"fee_rate": 0.25}})
    assert clean["provider_config"] == {"fee_rate": 0.25, "places": 10}
    # the aggregation's tie-break setting lives in the same object and is checked by its own rule
    assert controls.clean_provider_config({"tie_break": "prefer:bad"}) == {"tie_break": "prefer:bad"}
    with pytest.raises(CampaignError, match="is not a rule"):
        controls.clean_provider_config({"tie_break": "loudest"})


# --- the ledger ---------------------------------------------------------------------------------------


def test_the_ledger_page_lists_every_entry_with_token_and_reference(alice_client, bob, make_campaign):
    campaign = make_campaign("fluency", backend="linkout", reward_cents=150, budget_cents=1000, status="draft")
    from annotation.models import ProviderJob, Worker

    job = ProviderJob.objects.create(campaign=campaign, provider="linkout", unique_token="linkout-x-study",
                                     external_id="STUDY42", max_assignments=3, reward_cents=150)
    worker = Worker.objects.create(provider="linkout", external_id="PID0001")
    a = Assignment.objects.create(campaign=campaign, worker=worker, provider_assignment_id="SUB77", job=job)
    pool = money.commit(campaign, "linkout", "reward", 450, f"linkout:{campaign.pk}:places:0", job=job)
    paid = money.draw(pool, kind="reward", amount_cents=150, token=f"linkout:{a.pk}:reward", assignment=a,
                      worker=worker, note="reward on approval")
    money.mark_paid(paid)
    dashboard = alice_client.get(reverse("campaign-detail", args=[campaign.pk])).content.decode()
    assert reverse("campaign-ledger", args=[campaign.pk]) in dashboard
    page = alice_client.get(reverse("campaign-ledger", args=[campaign.pk])).content.decode()
    for entry in LedgerEntry.objects.filter(campaign=campaign):
        assert f'data-entry="{entry.pk}"' in page and f'<code data-role="token">{entry.token}</code>' in page
    assert LedgerEntry.objects.filter(campaign=campaign).count() == 4  # pool, its fee, the reward, its fee
    assert '<code data-role="reference">SUB77</code>' in page and '<code data-role="reference">STUDY42</code>' in page
    paid_only = alice_client.get(reverse("campaign-ledger", args=[campaign.pk]), {"state": "paid"}).content.decode()
    assert paid_only.count("data-entry=") == 2
    bob_client = Client()
    bob_client.force_login(bob)
    assert bob_client.get(reverse("campaign-ledger", args=[campaign.pk])).status_code == 403
    out = run("ledger", str(campaign.pk))
    assert "SUB77" in out and f"linkout:{a.pk}:reward" in out and out.strip().endswith("remaining 4.01.")


def test_ledger_entries_are_read_only_in_the_admin(admin_client, make_campaign):
    campaign = make_campaign("fluency", backend="linkout", budget_cents=1000)
    entry = money.commit(campaign, "linkout", "bonus", 50, "bonus:admin-test", note="for the admin")
    client = admin_client  # a superuser: even they cannot change money by hand
    listing = client.get(reverse("admin:annotation_ledgerentry_changelist"))
    assert listing.status_code == 200 and "bonus:admin-test" in listing.content.decode()
    detail = client.get(reverse("admin:annotation_ledgerentry_change", args=[entry.pk]))
    assert detail.status_code == 200 and "bonus:admin-test" in detail.content.decode()
    assert client.post(reverse("admin:annotation_ledgerentry_change", args=[entry.pk]),
                       {"amount_cents": "1", "token": "x"}).status_code == 403
    assert client.get(reverse("admin:annotation_ledgerentry_add")).status_code == 403
    assert client.post(reverse("admin:annotation_ledgerentry_delete", args=[entry.pk]), {"post": "yes"}).status_code == 403
    entry.refresh_from_db()
    assert entry.amount_cents == 50


# --- places ------------------------------------------------------------------------------------------


@pytest.fixture
def study(make_campaign, alice_client, settings):
    settings.LINKOUT_FEE_RATE = 0.5
    campaign = make_campaign("fluency", backend="linkout", status="draft", reward_cents=100, budget_cents=10_000,
                             name="Two places")
    controls.update_controls(campaign, {"places": 2, "provider_config": {"completion_code": "C0DE1234",
                                                                         "completion_url": URL}})
    assert alice_client.post(reverse("provider-action", args=[campaign.pk, "launch"])).status_code == 302
    campaign.refresh_from_db()
    return campaign


def start(campaign, pid, client=None):
    client = client or Client()
    return client.get(reverse("linkout-start", args=[campaign.public_token]), {"PROLIFIC_PID": pid})


def test_places_two_turn_the_third_participant_away(study):
    first, second = Client(), Client()
    assert start(study, "participant1", first).status_code == 302
    assert start(study, "participant2", second).status_code == 302
    response = start(study, "participant3")
    assert response.status_code == 409 and "all 2 places are taken" in response.content.decode()
    assert start(study, "participant1", first).status_code == 302  # an admitted participant comes back
    assert Assignment.objects.filter(campaign=study).count() == 2
    # a returned participant frees the place
    Assignment.objects.filter(campaign=study, worker__external_id="participant2").update(state="expired")
    assert start(study, "participant3").status_code == 302
    assert controls.admitted(study) == 2


@pytest.mark.django_db(transaction=True)
def test_simultaneous_participants_never_exceed_the_places(make_campaign, alice, settings):
    if connection.vendor != "postgresql":
        pytest.fail("places under concurrency are tested on PostgreSQL: set DATABASE_URL=postgres://...")
    settings.LINKOUT_FEE_RATE = 0.5
    campaign = make_campaign("fluency", backend="linkout", status="running", reward_cents=100, budget_cents=10_000,
                             name="Race for places")
    Campaign.objects.filter(pk=campaign.pk).update(public_token="race-token-0001",
                                                   provider_config={"places": 2, "completion_code": "C0DE1234"})
    campaign.refresh_from_db()
    barrier = threading.Barrier(8)
    codes = []

    def join(n):
        try:
            barrier.wait()
            codes.append(start(campaign, f"racer{n}").status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=join, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [302, 302] + [409] * 6, codes
    assert Assignment.objects.filter(campaign=campaign).count() == 2
