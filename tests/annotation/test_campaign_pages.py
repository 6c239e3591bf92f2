"""The curator's campaign pages through the Django test client: permissions, creating campaigns
from a collection and from a filter run's decisions, bad input given back with its message and the
typed values, status changes, gold and training items, blocking a worker, the dashboard (vote
count, SVG charts, escaping, filter against human) and the CSV export."""
import csv
import io
import sys
import types

import pytest
from django.urls import reverse

from annotation import routing, services
from annotation.models import Campaign, GoldAnswer, Membership, Task, Vote
from annotation.routing import next_task, submit_vote, worker_for_user
from curation.models import Caption, FilterDecision, FilterRun

from .conftest import make_annotators


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _filter_vs_human(monkeypatch):
    """The dashboard calls annotation.filter_vs_human, written alongside these pages; while that
    module is absent a stand-in that finds no comparable filter takes its place."""
    try:
        import annotation.filter_vs_human  # noqa: F401
    except ImportError:
        stub = types.ModuleType("annotation.filter_vs_human")
        stub.filter_vs_human = lambda campaign, precision=0.9: []
        monkeypatch.setitem(sys.modules, "annotation.filter_vs_human", stub)


def vote_all(campaign, user, label="fluent", seconds=4.0, limit=None):
    """The user votes ``label`` on tasks until none is left (or ``limit`` votes)."""
    worker = worker_for_user(user)
    n = 0
    while limit is None or n < limit:
        served = next_task(campaign, worker)
        if served.task is None:
            break
        submit_vote(campaign, worker, served.task.pk, label, seconds=seconds)
        n += 1
    return n


def form_data(collection, **overrides):
    data = {"name": "Fluency of alt-texts", "kind": "fluency", "collection": collection.pk, "seed": "0",
            "instructions": "Is the sentence **fluent** English?", "votes_per_item": "2", "priority": "order",
            "max_votes_per_item": "5", "confidence_threshold": "0.8", "gold_rate": "0", "reservation_seconds": "600",
            "edit_window_seconds": "120", "text_min_chars": "10", "text_max_chars": "300"}
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


# --- Permissions ---------------------------------------------------------------------------------


def page_urls(campaign):
    return [reverse("campaign-list"), reverse("campaign-create")] + [
        reverse(name, args=[campaign.pk]) for name in
        ("campaign-detail", "campaign-progress", "campaign-members", "campaign-gold", "campaign-workers",
         "campaign-tasks", "campaign-export")]


def post_urls(campaign):
    return [reverse(name, args=[campaign.pk]) for name in
            ("campaign-status", "campaign-aggregate", "campaign-members", "campaign-gold", "campaign-workers")] + [
        reverse("campaign-preview")]


def test_annotators_get_403_and_anonymous_users_the_login_page(client, make_campaign, bob, dave):
    campaign = make_campaign("fluency", members=[bob])
    for url in page_urls(campaign) + post_urls(campaign):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login")), url
    for user in (bob, dave):
        client.force_login(user)
        for url in page_urls(campaign):
            assert client.get(url).status_code == 403, url
        for url in post_urls(campaign):
            assert client.post(url, {"status": "paused", "worker": 1, "action": "block"}).status_code == 403, url
    campaign.refresh_from_db()
    assert campaign.status == "running"
    assert not Membership.objects.filter(blocked=True).exists()


def test_curators_and_admins_open_every_page(client, make_campaign, alice, carol, bob):
    campaign = make_campaign("fluency", members=[bob])
    for user in (alice, carol):
        client.force_login(user)
        for url in page_urls(campaign):
            assert client.get(url).status_code == 200, url


def test_nav_links_by_role(client, alice, bob):
    client.force_login(alice)
    home = client.get(reverse("home")).content.decode()
    assert f'href="{reverse("campaign-list")}"' in home and f'href="{reverse("campaign-create")}"' in home
    client.force_login(bob)
    home = client.get(reverse("home")).content.decode()
    assert f'href="{reverse("campaign-list")}"' not in home
    assert f'href="{reverse("annotate-list")}"' in home


# --- Create ------------------------------------------------------------------------------------


def test_create_a_fluency_campaign_from_a_collection(alice_client, collection, bob, django_user_model):
    [ann] = make_annotators(django_user_model, 1)
    response = alice_client.post(reverse("campaign-create"),
                                 form_data(collection, members=[bob.pk, ann.pk], start="on"))
    campaign = Campaign.objects.get(name="Fluency of alt-texts")
    assert response.status_code == 302 and response["Location"] == reverse("campaign-detail", args=[campaign.pk])
    assert campaign.kind == "fluency" and campaign.status == "running" and campaign.votes_per_item == 2
    assert campaign.created_by.username == "alice"
    assert campaign.tasks.count() == 12
    assert set(campaign.tasks.values_list("caption_id", flat=True)) == set(
        Caption.objects.filter(image__collection=collection).values_list("pk", flat=True))
    assert set(Membership.objects.filter(campaign=campaign).values_list("worker__user__username", flat=True)) == {
        "bob", "ann0"}
    page = alice_client.get(response["Location"]).content.decode()
    assert "12 tasks" in page  # the success message
    assert "<strong>fluent</strong>" in page  # the instructions, rendered from Markdown


def test_create_a_write_campaign_with_a_sample_feeding_a_rating_campaign(alice_client, collection, make_campaign):
    rating = make_campaign("quality", collection=collection, name="Rate written captions", status="draft")
    response = alice_client.post(reverse("campaign-create"), form_data(
        collection, name="Write captions", kind="write", votes_per_item="3", sample="5", seed="7",
        text_min_chars="12", text_max_chars="120", rate_campaign=rating.pk, open_to_all="on"))
    assert response.status_code == 302
    campaign = Campaign.objects.get(name="Write captions")
    assert campaign.kind == "write" and campaign.status == "draft" and campaign.open_to_all
    assert campaign.tasks.count() == 5 and campaign.tasks.filter(caption__isnull=False).count() == 0
    assert set(campaign.tasks.values_list("votes_required", flat=True)) == {3}
    assert (campaign.text_min_chars, campaign.text_max_chars, campaign.rate_campaign) == (12, 120, rating)


def make_filter_run(collection, scores):
    """A finished run of one scoring step over the collection's captions, built by hand: caption
    text -> (outcome, score)."""
    run = FilterRun.objects.create(collection=collection, status=FilterRun.Status.DONE,
                                   snapshot=[{"filter": "fluency_score", "version": 1, "params": {}}])
    for caption in Caption.objects.filter(image__collection=collection):
        if caption.text in scores:
            outcome, score = scores[caption.text]
            FilterDecision.objects.create(run=run, step=0, filter_name="fluency_score", image=caption.image,
                                          caption=caption, outcome=outcome, score=score)
    return run


def test_create_from_a_runs_kept_items_in_a_score_range(alice_client, collection):
    from .conftest import TEXTS

    run = make_filter_run(collection, {
        TEXTS[0]: ("keep", 0.9), TEXTS[1]: ("keep", 0.5), TEXTS[2]: ("keep", 0.31), TEXTS[3]: ("drop", 0.6),
        TEXTS[4]: ("keep", 0.7), TEXTS[5]: ("drop", 0.1), TEXTS[6]: ("keep", 0.29)})
    response = alice_client.post(reverse("campaign-create"), form_data(
        collection, name="Uncertain fluency", run=run.pk, step="0", outcome="keep", score_min="0.3",
        score_max="0.7", priority="uncertain"))
    assert response.status_code == 302, response.content.decode()[:2000]
    campaign = Campaign.objects.get(name="Uncertain fluency")
    tasks = list(campaign.tasks.select_related("caption").order_by("priority"))
    assert {t.caption.text for t in tasks} == {TEXTS[1], TEXTS[2], TEXTS[4]}
    assert tasks[0].caption.text == TEXTS[1]  # score 0.5: nearest 0.5 first
    assert {t.model_score for t in tasks} == {0.5, 0.31, 0.7}
    assert campaign.selection["run"] == run.pk and campaign.selection["outcome"] == "keep"


@pytest.mark.parametrize("overrides, field, message", [
    ({"name": "  "}, "name", "A campaign needs a name."),
    ({"kind": "poetry"}, "kind", "Unknown campaign kind poetry"),
    ({"votes_per_item": "0"}, "votes_per_item", "Votes per item must be between 1 and 50."),
    ({"score_min": "0.3", "score_max": "0.7"}, "score_min", "A score range needs a filter run and a step."),
    ({"gold_rate": "0.9"}, "gold_rate", "The gold rate must be between 0 and 0.5."),
    ({"sample": "-3"}, "sample", "The sample size must be positive."),
])
def test_bad_input_comes_back_with_the_message_and_the_typed_values(alice_client, collection, overrides, field,
                                                                    message):
    data = form_data(collection, instructions="Keep <this> text & *that*", **overrides)
    response = alice_client.post(reverse("campaign-create"), data)
    assert response.status_code == 400
    page = response.content.decode()
    form = response.context["form"]
    assert any(message in e for e in form.errors.get(field, [])), form.errors
    assert message.replace("'", "&#x27;") in page
    # Nothing typed is lost: the instructions (escaped), the kind and the numbers are still there.
    assert "Keep &lt;this&gt; text &amp; *that*</textarea>" in page
    assert f'value="{data["max_votes_per_item"]}"' in page and 'value="0.8"' in page
    if field != "kind":
        assert 'value="fluency" checked' in page
    assert not Campaign.objects.exists()


def test_a_step_beyond_the_runs_snapshot_is_refused(alice_client, collection):
    run = make_filter_run(collection, {})
    response = alice_client.post(reverse("campaign-create"), form_data(collection, run=run.pk, step="3"))
    assert response.status_code == 400
    assert "has 1 steps" in response.content.decode()


def test_instructions_preview_renders_markdown_safely(alice_client):
    response = alice_client.post(reverse("campaign-preview"),
                                 {"instructions": "# Rate\n\n<script>alert(1)</script> **bold**"})
    page = response.content.decode()
    assert response.status_code == 200
    assert "<strong>bold</strong>" in page and "<script>" not in page


# --- Status, members, gold -------------------------------------------------------------------------


def test_status_transitions(alice_client, make_campaign):
    campaign = make_campaign("fluency", status="draft")
    url = reverse("campaign-status", args=[campaign.pk])
    detail = alice_client.get(reverse("campaign-detail", args=[campaign.pk])).content.decode()
    assert 'data-status-action="running"' in detail and 'data-status-action="paused"' not in detail
    for target in ("running", "paused", "running", "finished"):
        response = alice_client.post(url, {"status": target})
        assert response.status_code == 302
        campaign.refresh_from_db()
        assert campaign.status == target
    response = alice_client.post(url, {"status": "paused"})
    assert response.status_code == 409
    assert "A finished campaign cannot become paused." in response.content.decode()
    campaign.refresh_from_db()
    assert campaign.status == "finished"
    assert alice_client.get(url).status_code == 405


def test_adding_members(alice_client, make_campaign, bob, django_user_model):
    users = make_annotators(django_user_model, 2)
    campaign = make_campaign("fluency", members=[bob])
    url = reverse("campaign-members", args=[campaign.pk])
    page = alice_client.get(url).content.decode()
    assert "ann0" in page and "ann1" in page
    response = alice_client.post(url, {"members": [users[0].pk]})
    assert response.status_code == 302
    assert set(Membership.objects.filter(campaign=campaign).values_list("worker__user__username", flat=True)) == {
        "bob", "ann0"}
    assert alice_client.post(url, {}).status_code == 400


def test_marking_gold_and_training_items(alice_client, make_campaign, bob):
    campaign = make_campaign("fluency", members=[bob])
    first, second, third = campaign.tasks.order_by("position")[:3]
    url = reverse("campaign-gold", args=[campaign.pk])
    page = alice_client.get(url).content.decode()
    assert reverse("image-thumbnail", args=[first.image_id]) in page and first.caption.text in page

    response = alice_client.post(url, {"task": first.pk, "role": "gold", "value": "fluent"})
    assert response.status_code == 302
    response = alice_client.post(url, {"task": second.pk, "role": "training", "value": "not_fluent",
                                       "feedback": "The verb is missing."})
    assert response.status_code == 302
    first.refresh_from_db(), second.refresh_from_db()
    assert first.role == "gold" and GoldAnswer.objects.get(task=first).value == {"label": "fluent"}
    assert second.role == "training"
    assert GoldAnswer.objects.get(task=second).feedback == "The verb is missing."

    response = alice_client.post(url, {"task": third.pk, "role": "gold", "value": "brilliant"})
    assert response.status_code == 400
    assert "not one of this campaign" in response.content.decode()
    third.refresh_from_db()
    assert third.role == "real" and not GoldAnswer.objects.filter(task=third).exists()
    assert alice_client.post(url, {"task": third.pk, "role": "boss", "value": "fluent"}).status_code == 400

    listing = alice_client.get(url + "?role=training").content.decode()
    assert f'data-task="{second.pk}"' in listing and f'data-task="{first.pk}"' not in listing
    # A task of another campaign cannot be touched from this page.
    other = make_campaign("fluency", name="other")
    response = alice_client.post(url, {"task": other.tasks.first().pk, "role": "gold", "value": "fluent"})
    assert response.status_code == 404


# --- Workers -------------------------------------------------------------------------------------


def test_blocking_a_worker_reopens_their_tasks_and_unblocking_counts_them_again(alice_client, make_campaign, bob,
                                                                              django_user_model):
    [ann] = make_annotators(django_user_model, 1)
    campaign = make_campaign("fluency", members=[bob, ann], votes_per_item=1)
    assert vote_all(campaign, bob, limit=4) == 4
    assert campaign.tasks.filter(status="done").count() == 4
    bob_worker = worker_for_user(bob)
    url = reverse("campaign-workers", args=[campaign.pk])

    response = alice_client.post(url, {"worker": bob_worker.pk, "action": "block", "reason": ""})
    assert response.status_code == 400 and "Give a reason" in response.content.decode()
    assert not Membership.objects.get(campaign=campaign, worker=bob_worker).blocked

    response = alice_client.post(url, {"worker": bob_worker.pk, "action": "block", "reason": "random clicking"})
    assert response.status_code == 302
    membership = Membership.objects.get(campaign=campaign, worker=bob_worker)
    assert membership.blocked and membership.blocked_reason == "random clicking"
    assert campaign.tasks.filter(status="done").count() == 0
    page = alice_client.get(url).content.decode()
    assert "4 tasks reopened" in page and "random clicking" in page
    with pytest.raises(routing.RoutingError):
        next_task(campaign, bob_worker)

    response = alice_client.post(url, {"worker": bob_worker.pk, "action": "unblock"})
    assert response.status_code == 302
    assert not Membership.objects.get(campaign=campaign, worker=bob_worker).blocked
    assert campaign.tasks.filter(status="done").count() == 4

    stranger = worker_for_user(django_user_model.objects.create_user("stranger"))
    assert alice_client.post(url, {"worker": stranger.pk, "action": "block", "reason": "x"}).status_code == 404


# --- Dashboard -----------------------------------------------------------------------------------


def test_dashboard_shows_votes_charts_and_escapes_worker_names(alice_client, make_campaign, django_user_model):
    evil = django_user_model.objects.create_user("<b>evil</b>")
    users = make_annotators(django_user_model, 2) + [evil]
    from django.contrib.auth.models import Group

    evil.groups.add(Group.objects.get(name="annotator"))
    campaign = make_campaign("fluency", members=users, votes_per_item=2)
    vote_all(campaign, users[0], "fluent", seconds=3)
    vote_all(campaign, users[1], "not_fluent", seconds=9, limit=5)
    vote_all(campaign, evil, "difficult", seconds=6, limit=2)
    stored = Vote.objects.filter(campaign=campaign).count()
    assert stored == 12 + 5 + 2

    response = alice_client.get(reverse("campaign-detail", args=[campaign.pk]))
    page = response.content.decode()
    assert response.status_code == 200
    assert f'<span id="campaign-votes" data-role="votes">{stored}</span>' in page
    assert page.count("<svg") >= 3
    assert 'class="chart throughput-chart"' in page and 'class="chart seconds-chart"' in page
    assert 'data-label="fluent" data-value="12"' in page  # the live vote distribution
    assert 'data-label="not_fluent" data-value="5"' in page
    assert "&lt;b&gt;evil&lt;/b&gt;" in page and "<b>evil</b>" not in page
    assert 'hx-trigger="every 5s"' in page  # running: the progress polls
    assert "Not aggregated yet" in page
    # Median of 3 s x12, 9 s x5, 6 s x2 is 3 s.
    assert '<dd data-role="median-seconds">3.0 s</dd>' in page


def test_dashboard_reads_the_aggregation_stats(alice_client, make_campaign, bob):
    campaign = make_campaign("quality", members=[bob], status="paused")
    worker = worker_for_user(bob)
    campaign.stats = {
        "computed_at": "2025-01-02T03:04:05+00:00", "n_votes": 99, "n_tasks": 12, "n_tasks_aggregated": 12,
        "vote_distribution": {"good": 20, "<i>bad</i>": 16},
        "label_distribution": {"majority": {"good": 7, "bad": 5}, "dawid_skene": {"good": 8, "bad": 4}},
        "agreement": {"alpha": 0.71, "metric": "nominal", "per_part": {}, "n_items": 12},
        "workers": [{"worker": worker.pk, "name": "bob", "votes": 12, "gold_seen": 0, "gold_correct": 0,
                     "gold_accuracy": None, "reliability": 0.93, "agreement_with_consensus": 0.88,
                     "median_seconds": 4.5, "blocked": False}],
        "seed_figures": {"good_shares": {"1+": 0.9, "2+": 0.6, "3+": 0.25}},
        "methods": ["majority", "dawid_skene"],
    }
    campaign.save()
    page = alice_client.get(reverse("campaign-detail", args=[campaign.pk])).content.decode()
    assert 'data-role="computed-at"' in page and "2025-01-02" in page
    assert "0 votes are stored now" in page  # stale: 99 at aggregation time, none now
    assert '<strong data-role="alpha">0.710</strong>' in page and "tentative" in page
    assert "&lt;i&gt;bad&lt;/i&gt;" in page and "<i>bad</i>" not in page
    assert 'data-series="majority" data-label="good" data-value="7"' in page
    assert 'data-series="dawid_skene" data-label="bad" data-value="4"' in page
    assert ">0.93<" in page and ">4.5<" in page
    assert "90%" in page and "25%" in page
    assert 'hx-trigger="every 5s"' not in page  # paused: no polling
    assert 'data-status-action="running"' in page and 'data-status-action="finished"' in page


def test_agreement_hint_levels():
    from annotation.web.curator.views import agreement_hint

    assert agreement_hint(0.85)[0] == "reliable"
    assert agreement_hint(0.8)[0] == "reliable"
    assert agreement_hint(0.7)[0] == "tentative"
    assert agreement_hint(0.5)[0] == "unreliable"
    assert agreement_hint(None)[0] == "none"


def test_filter_vs_human_tables_and_precision_parameter(alice_client, make_campaign, monkeypatch):
    campaign = make_campaign("informativeness")
    asked = []

    def fake(c, precision=0.9):
        asked.append((c.pk, precision))
        return [{"run": 7, "step": 1, "filter": "<informativeness>", "positive": "good",
                 "matrix": {"keep": {"good": 30, "bad": 5}, "drop": {"good": 4, "bad": 21}},
                 "precision": 0.857, "recall": 0.882, "n": 60,
                 "suggestion": {"threshold": 0.62, "direction": ">=", "precision": 0.95, "recall": 0.7}}]

    monkeypatch.setattr("annotation.filter_vs_human.filter_vs_human", fake, raising=False)
    url = reverse("campaign-detail", args=[campaign.pk])
    page = alice_client.get(url).content.decode()
    assert asked == [(campaign.pk, 0.9)]
    assert "&lt;informativeness&gt;" in page and "<informativeness>" not in page
    assert '<td class="num">30</td><td class="num">5</td>' in page
    assert '<td class="num">4</td><td class="num">21</td>' in page
    assert "score is &gt;= <strong>0.6200</strong>" in page
    alice_client.get(url, {"precision": "0.95"})
    assert asked[-1] == (campaign.pk, 0.95)
    response = alice_client.get(url, {"precision": "lots"})
    assert response.status_code == 400 and "is not a number" in response.content.decode()
    assert asked[-1] == (campaign.pk, 0.9)


def test_recompute_queues_the_aggregation(alice_client, make_campaign, monkeypatch):
    campaign = make_campaign("fluency")
    queued = []
    monkeypatch.setattr("annotation.tasks.aggregate_campaign.delay", lambda pk: queued.append(pk))
    response = alice_client.post(reverse("campaign-aggregate", args=[campaign.pk]))
    assert response.status_code == 302 and queued == [campaign.pk]
    assert alice_client.get(reverse("campaign-aggregate", args=[campaign.pk])).status_code == 405


def test_tasks_page_lists_votes_and_aggregated_labels(alice_client, make_campaign, bob):
    from annotation.models import Aggregate

    campaign = make_campaign("fluency", members=[bob], votes_per_item=1)
    vote_all(campaign, bob, "fluent", limit=1)
    task = campaign.tasks.filter(votes_count=1).get()
    Aggregate.objects.create(task=task, method="majority", label="fluent", confidence=1.0, n_votes=1)
    page = alice_client.get(reverse("campaign-tasks", args=[campaign.pk])).content.decode()
    assert f'<tr data-task="{task.pk}">' in page
    assert '<strong>fluent</strong>' in page and 'data-method="majority"' in page
    done = alice_client.get(reverse("campaign-tasks", args=[campaign.pk]), {"status": "done"}).content.decode()
    assert done.count("<tr data-task=") == 1
    paged = alice_client.get(reverse("campaign-tasks", args=[campaign.pk]), {"page": "99"})
    assert paged.status_code == 200


def test_campaign_list_counts(alice_client, make_campaign, bob):
    campaign = make_campaign("fluency", members=[bob], votes_per_item=1, name="Listed")
    vote_all(campaign, bob, limit=3)
    page = alice_client.get(reverse("campaign-list")).content.decode()
    assert "Listed" in page and "3 / 12 tasks" in page
    assert "Listed" not in alice_client.get(reverse("campaign-list"), {"status": "draft"}).content.decode()


# --- Export --------------------------------------------------------------------------------------


def test_csv_export_of_votes_and_aggregates(alice_client, make_campaign, bob, django_user_model):
    from annotation.models import Aggregate

    campaign = make_campaign("fluency", members=[bob], votes_per_item=1)
    vote_all(campaign, bob, "not_fluent", seconds=2.5, limit=2)
    task = Caption.objects.get(pk=Vote.objects.filter(campaign=campaign).first().task.caption_id)
    task.text = "=HYPERLINK(\"http://x\")"
    task.save()
    url = reverse("campaign-export", args=[campaign.pk])
    response = alice_client.get(url)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert f"campaign-{campaign.pk}-votes.csv" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(rows) == 2
    assert {r["worker_name"] for r in rows} == {"bob"} and {r["label"] for r in rows} == {"not_fluent"}
    assert {r["seconds"] for r in rows} == {"2.500"} and rows[0]["value"] == '{"label": "not_fluent"}'
    assert "'=HYPERLINK(\"http://x\")" in {r["caption_text"] for r in rows}  # not a live formula

    voted = Vote.objects.filter(campaign=campaign).first().task
    Aggregate.objects.create(task=voted, method="dawid_skene", label="not_fluent", confidence=0.97, n_votes=1)
    response = alice_client.get(url, {"table": "aggregates"})
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["task_id"], r["method"], r["label"], r["confidence"]) for r in rows] == [
        (str(voted.pk), "dawid_skene", "not_fluent", "0.97")]
    assert alice_client.get(url, {"table": "passwords"}).status_code == 400


def test_services_progress_matches_the_dashboard_after_blocking(alice_client, make_campaign, bob):
    """The vote count the dashboard shows is services.progress's: every stored real vote."""
    campaign = make_campaign("fluency", members=[bob], votes_per_item=1)
    vote_all(campaign, bob, limit=3)
    routing.block_worker(campaign, worker_for_user(bob), reason="test")
    page = alice_client.get(reverse("campaign-detail", args=[campaign.pk])).content.decode()
    assert f'id="campaign-votes" data-role="votes">{services.progress(campaign)["votes"]}<' in page
    assert Task.objects.filter(campaign=campaign, status="done").count() == 0
