"""The annotator's work pages through the Django test client: who may open them, plain form posts
(no JavaScript) and htmx requests, bad input (a clear message, the right status, nothing lost),
undo within the edit window, training feedback and the qualification test."""
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation import routing
from annotation.models import Campaign, Reservation, Task, Vote, VoteEdit
from annotation.routing import worker_for_user
from annotation.services import set_gold
from curation.models import Caption

from .conftest import make_annotators, make_collection

HX = {"HTTP_HX_REQUEST": "true"}


def url(name, campaign):
    return reverse(name, args=[campaign.pk])


def held_task(campaign, user) -> Task:
    """The task the page shows (and reserved) for this user."""
    return routing.next_task(campaign, worker_for_user(user)).task


def shown_task_id(response) -> int:
    match = re.search(r'name="task" value="(\d+)"', response.content.decode())
    assert match, "the page shows no task form"
    return int(match.group(1))


@pytest.fixture
def aggregations(monkeypatch):
    """Record the aggregation requests instead of queueing them."""
    calls = []
    monkeypatch.setattr("annotation.tasks.schedule_aggregation", lambda campaign_id: calls.append(campaign_id))
    return calls


# --- who may open the pages -----------------------------------------------------------------------


def test_strangers_are_refused_and_anonymous_users_go_to_the_login(make_campaign, bob, dave, client,
                                                                   django_user_model):
    campaign = make_campaign("fluency", members=[bob])
    task = campaign.tasks.first()
    response = client.get(url("annotate", campaign))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert client.post(url("annotate-submit", campaign), {"task": task.pk, "label": "fluent"}).status_code == 302

    (stranger,) = make_annotators(django_user_model, 1, prefix="stranger")
    client.force_login(stranger)
    response = client.get(url("annotate", campaign))
    assert response.status_code == 404
    assert "You are not a member of this campaign." in response.content.decode()
    for name in ("annotate-submit", "annotate-undo", "annotate-skip"):
        assert client.post(url(name, campaign), {"task": task.pk, "label": "fluent"}).status_code == 404, name
    assert client.get(reverse("annotate", args=[campaign.pk + 1000])).status_code == 404
    assert campaign.name not in client.get(reverse("annotate-list")).content.decode()

    client.force_login(dave)
    assert client.get(url("annotate", campaign)).status_code == 403
    assert client.get(reverse("annotate-list")).status_code == 403
    assert client.post(url("annotate-submit", campaign), {"task": task.pk, "label": "fluent"}).status_code == 403
    assert not Vote.objects.exists() and not Reservation.objects.exists()


def test_a_blocked_member_gets_403(make_campaign, bob, bob_client, bob_worker):
    campaign = make_campaign("fluency", members=[bob])
    routing.block_worker(campaign, bob_worker, reason="spam")
    response = bob_client.get(url("annotate", campaign))
    assert response.status_code == 403
    assert "blocked" in response.content.decode()


def test_a_curator_previews_without_reserving_or_voting(make_campaign, bob, alice, client):
    campaign = make_campaign("quality", members=[bob])
    client.force_login(alice)
    response = client.get(url("annotate", campaign))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Preview" in html and 'data-role="vote-form"' in html
    assert not Reservation.objects.exists()
    response = client.post(url("annotate-submit", campaign), {"task": campaign.tasks.first().pk, "label": "good"})
    assert response.status_code == 403 and "preview" in response.content.decode()
    assert not Vote.objects.exists()


# --- votes without JavaScript and with htmx ------------------------------------------------------


def test_a_plain_form_post_records_the_vote_and_redirects(make_campaign, bob, bob_client, aggregations):
    campaign = make_campaign("fluency", members=[bob])
    page = bob_client.get(url("annotate", campaign))
    assert page.status_code == 200
    html = page.content.decode()
    task_id = shown_task_id(page)
    caption = Task.objects.get(pk=task_id).caption
    assert caption.text in html
    assert reverse("image-file", args=[Task.objects.get(pk=task_id).image_id]) in html
    assert 'data-key="1"' in html and "Fluent" in html and "Difficult to tell" in html

    response = bob_client.post(url("annotate-submit", campaign), {"task": task_id, "label": "not_fluent",
                                                                   "seconds": "4.5"})
    assert response.status_code == 302 and response["Location"] == url("annotate", campaign)
    vote = Vote.objects.get()
    assert (vote.task_id, vote.value, vote.seconds) == (task_id, {"label": "not_fluent"}, 4.5)
    assert aggregations == [campaign.pk]
    following = bob_client.get(url("annotate", campaign))
    assert shown_task_id(following) != task_id
    assert re.search(r'data-role="done">1<', following.content.decode())


def test_without_a_posted_time_the_server_counts_from_the_reservation(make_campaign, bob, bob_client, aggregations):
    campaign = make_campaign("fluency", members=[bob])
    task_id = shown_task_id(bob_client.get(url("annotate", campaign)))
    Reservation.objects.filter(task_id=task_id).update(created_at=timezone.now() - timedelta(seconds=30))
    bob_client.post(url("annotate-submit", campaign), {"task": task_id, "label": "fluent"})
    assert 29 <= Vote.objects.get().seconds <= 60


def test_an_htmx_submit_returns_the_panel_with_the_next_task(make_campaign, bob, bob_client, aggregations):
    campaign = make_campaign("quality", members=[bob])
    first = shown_task_id(bob_client.get(url("annotate", campaign)))
    response = bob_client.post(url("annotate-submit", campaign), {"task": first, "label": "good"}, **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="task-panel"') and "<html" not in html
    assert "HX-Request" in response["Vary"]
    second = shown_task_id(response)
    assert second != first
    assert Reservation.objects.get(worker__user=bob).task_id == second
    assert re.search(r'data-role="done">1<', html)
    assert Task.objects.get(pk=second).caption.text in html


def test_a_double_post_of_the_same_task_gives_one_vote(make_campaign, bob, bob_client, aggregations):
    campaign = make_campaign("quality", members=[bob])
    task_id = shown_task_id(bob_client.get(url("annotate", campaign)))
    one = bob_client.post(url("annotate-submit", campaign), {"task": task_id, "label": "good"})
    two = bob_client.post(url("annotate-submit", campaign), {"task": task_id, "label": "bad"}, **HX)
    assert one.status_code == 302 and two.status_code == 200
    assert Vote.objects.filter(task_id=task_id).count() == 1
    assert Vote.objects.get(task_id=task_id).value == {"label": "good"}
    assert Task.objects.get(pk=task_id).votes_count == 1
    assert aggregations == [campaign.pk]  # the replay stores nothing, so it schedules nothing


def test_a_value_outside_the_choices_gets_400_and_loses_nothing(make_campaign, bob, bob_client, aggregations):
    campaign = make_campaign("fluency", members=[bob])
    task_id = shown_task_id(bob_client.get(url("annotate", campaign)))
    response = bob_client.post(url("annotate-submit", campaign), {"task": task_id, "label": "brilliant"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "not one of this campaign" in html and "fluent" in html
    assert shown_task_id(response) == task_id  # the same task, still held
    assert Reservation.objects.filter(task_id=task_id, worker__user=bob).exists()
    assert not Vote.objects.exists() and aggregations == []
    hx = bob_client.post(url("annotate-submit", campaign), {"task": task_id}, **HX)
    assert hx.status_code == 400 and "Choose an answer first." in hx.content.decode()
    assert hx["X-Annotate-Panel"] == "1"  # annotate.js swaps 4xx answers that carry it
    ok = bob_client.post(url("annotate-submit", campaign), {"task": task_id, "label": "fluent"})
    assert ok.status_code == 302 and Vote.objects.get().value == {"label": "fluent"}


def test_a_task_not_reserved_to_the_worker_is_refused_with_409(make_campaign, bob, bob_client):
    campaign = make_campaign("fluency", members=[bob])
    held = shown_task_id(bob_client.get(url("annotate", campaign)))
    other = campaign.tasks.exclude(pk=held).first()
    response = bob_client.post(url("annotate-submit", campaign), {"task": other.pk, "label": "fluent"})
    assert response.status_code == 409 and "not reserved to you" in response.content.decode()
    assert shown_task_id(response) == held and not Vote.objects.exists()
    response = bob_client.post(url("annotate-submit", campaign), {"label": "fluent"})
    assert response.status_code == 400 and "which task" in response.content.decode()


def test_an_expired_reservation_still_takes_the_vote_while_the_item_needs_it(make_campaign, bob, bob_client):
    campaign = make_campaign("fluency", members=[bob])
    held = shown_task_id(bob_client.get(url("annotate", campaign)))
    Reservation.objects.filter(task_id=held).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = bob_client.post(url("annotate-submit", campaign), {"task": held, "label": "fluent"})
    assert response.status_code == 302 and Vote.objects.get().task_id == held


def test_a_paused_campaign_says_so_with_409(make_campaign, bob, bob_client):
    campaign = make_campaign("fluency", members=[bob], status="paused")
    response = bob_client.get(url("annotate", campaign))
    assert response.status_code == 409 and "This campaign is paused." in response.content.decode()


def test_missing_csrf_token_is_refused(make_campaign, bob, aggregations):
    campaign = make_campaign("fluency", members=[bob])
    client = Client(enforce_csrf_checks=True)
    client.force_login(bob)
    page = client.get(url("annotate", campaign))
    task_id = shown_task_id(page)
    response = client.post(url("annotate-submit", campaign), {"task": task_id, "label": "fluent"})
    assert response.status_code == 403
    assert not Vote.objects.exists()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
    response = client.post(url("annotate-submit", campaign),
                           {"task": task_id, "label": "fluent", "csrfmiddlewaretoken": token})
    assert response.status_code == 302 and Vote.objects.count() == 1


# --- writing captions -----------------------------------------------------------------------------


def test_a_written_caption_with_script_is_refused_shown_escaped_and_kept_in_the_form(make_campaign, bob,
                                                                                      bob_client, aggregations):
    rating = make_campaign("quality", members=[bob], name="rate the written captions")
    rating.tasks.all().delete()  # only the fed caption is left to rate
    writing = make_campaign("write", members=[bob], rate_campaign=rating)
    page = bob_client.get(url("annotate", writing))
    assert 'name="text"' in page.content.decode() and 'data-max="300"' in page.content.decode()
    task_id = shown_task_id(page)
    text = 'A dog <script>alert("x")</script> runs on the beach'
    refused = bob_client.post(url("annotate-submit", writing), {"task": task_id, "text": text})
    html = refused.content.decode()
    assert refused.status_code == 400 and "HTML tags" in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html and "<script>alert" not in html
    assert not Caption.objects.filter(origin=Caption.Origin.CROWD).exists()
    text = 'A dog called "Rex" runs on the beach & barks'
    response = bob_client.post(url("annotate-submit", writing), {"task": task_id, "text": text})
    assert response.status_code == 302
    caption = Caption.objects.get(origin=Caption.Origin.CROWD)
    assert caption.text == text
    assert Vote.objects.get(campaign=writing).value == {"text": text}
    html = bob_client.get(url("annotate", rating)).content.decode()
    assert "A dog called &quot;Rex&quot; runs on the beach &amp; barks" in html


def test_a_too_long_caption_is_refused_and_the_typed_text_kept(make_campaign, bob, bob_client):
    campaign = make_campaign("write", members=[bob], text_max_chars=40)
    task_id = shown_task_id(bob_client.get(url("annotate", campaign)))
    text = "A very long caption about a red bus <b>driving</b> past the old harbour at night"
    response = bob_client.post(url("annotate-submit", campaign), {"task": task_id, "text": text})
    assert response.status_code == 400
    html = response.content.decode()
    assert "The caption is too long" in html and "at most 40" in html
    assert f">{text.replace('<', '&lt;').replace('>', '&gt;')}</textarea>" in html
    assert not Vote.objects.exists() and not Caption.objects.filter(origin=Caption.Origin.CROWD).exists()
    short = bob_client.post(url("annotate-submit", campaign), {"task": task_id, "text": "a dog"}, **HX)
    assert short.status_code == 400 and "too short" in short.content.decode() and ">a dog</textarea>" in short.content.decode()
    markup = bob_client.post(url("annotate-submit", campaign), {"task": task_id, "text": "<br><br> <hr> <p></p>"})
    assert markup.status_code == 400 and "only HTML markup" in markup.content.decode()
    assert not Vote.objects.exists()


def test_written_captions_cannot_be_undone(make_campaign, bob, bob_client, aggregations):
    campaign = make_campaign("write", members=[bob])
    task_id = shown_task_id(bob_client.get(url("annotate", campaign)))
    bob_client.post(url("annotate-submit", campaign), {"task": task_id, "text": "Two children play near a fountain."})
    response = bob_client.post(url("annotate-undo", campaign))
    assert response.status_code == 409 and "cannot be changed" in response.content.decode()


# --- undo -----------------------------------------------------------------------------------------


def test_undo_within_the_window_edits_the_vote_with_an_audit_trail(make_campaign, bob, bob_client, aggregations):
    campaign = make_campaign("fluency", members=[bob])
    first = shown_task_id(bob_client.get(url("annotate", campaign)))
    bob_client.post(url("annotate-submit", campaign), {"task": first, "label": "fluent"})
    held = shown_task_id(bob_client.get(url("annotate", campaign)))
    vote = Vote.objects.get()

    response = bob_client.post(url("annotate-undo", campaign))
    assert response.status_code == 302 and response["Location"].endswith(f"?edit={vote.pk}")
    page = bob_client.get(response["Location"]).content.decode()
    assert 'data-role="editing"' in page and f'name="vote" value="{vote.pk}"' in page
    assert re.search(r'value="fluent" data-key="1" checked', page)  # the answer given, picked again

    hx = bob_client.post(url("annotate-undo", campaign), **HX)
    assert hx.status_code == 200 and f'name="vote" value="{vote.pk}"' in hx.content.decode()
    response = bob_client.post(url("annotate-submit", campaign), {"task": first, "vote": vote.pk, "label": "difficult"},
                               **HX)
    assert response.status_code == 200
    assert shown_task_id(response) == held  # back to the task held before the undo
    vote.refresh_from_db()
    assert vote.value == {"label": "difficult"}
    edit = VoteEdit.objects.get(vote=vote)
    assert (edit.old_value, edit.new_value) == ({"label": "fluent"}, {"label": "difficult"})
    assert Vote.objects.count() == 1 and Task.objects.get(pk=first).votes_count == 1


def test_undo_after_the_window_says_it_closed(make_campaign, bob, bob_client, aggregations):
    campaign = make_campaign("fluency", members=[bob], edit_window_seconds=60)
    response = bob_client.post(url("annotate-undo", campaign))
    assert response.status_code == 409 and "no vote to undo" in response.content.decode()
    first = shown_task_id(bob_client.get(url("annotate", campaign)))
    bob_client.post(url("annotate-submit", campaign), {"task": first, "label": "fluent"})
    vote = Vote.objects.get()
    Vote.objects.filter(pk=vote.pk).update(created_at=timezone.now() - timedelta(seconds=61))
    response = bob_client.post(url("annotate-undo", campaign), **HX)
    assert response.status_code == 409 and "no vote to undo" in response.content.decode()
    page = bob_client.get(f"{url('annotate', campaign)}?edit={vote.pk}")
    assert page.status_code == 409 and "edit window" in page.content.decode()
    late = bob_client.post(url("annotate-submit", campaign), {"task": first, "vote": vote.pk, "label": "difficult"})
    assert late.status_code == 409 and "edit window of this vote has closed" in late.content.decode()
    vote.refresh_from_db()
    assert vote.value == {"label": "fluent"} and not VoteEdit.objects.exists()


# --- training, qualification, the end ------------------------------------------------------------


def test_training_feedback_is_shown_then_the_work(make_campaign, bob, bob_client, aggregations):
    campaign = make_campaign("fluency", members=[bob], instructions="Rate the **English**, not the photo.")
    first, second = campaign.tasks.order_by("position")[:2]
    set_gold(first, role=Task.Role.TRAINING, value="fluent", feedback="A *complete* sentence reads fluently.")
    set_gold(second, role=Task.Role.TRAINING, value="not_fluent", feedback="Words missing.")
    page = bob_client.get(url("annotate", campaign)).content.decode()
    assert "Training example 1 of 2" in page and "<strong>English</strong>" in page
    assert "complete" not in page  # no answer before answering

    response = bob_client.post(url("annotate-submit", campaign), {"task": first.pk, "label": "not_fluent"})
    assert response.status_code == 302 and "?feedback=" in response["Location"]
    feedback = bob_client.get(response["Location"]).content.decode()
    assert "Not quite" in feedback and "Fluent" in feedback
    assert "A <em>complete</em> sentence reads fluently." in feedback
    assert 'data-role="continue"' in feedback

    page = bob_client.get(url("annotate", campaign)).content.decode()
    assert "Training example 2 of 2" in page
    hx = bob_client.post(url("annotate-submit", campaign), {"task": second.pk, "label": "not_fluent"}, **HX)
    assert hx.status_code == 200
    assert "Correct" in hx.content.decode() and "Words missing." in hx.content.decode()

    work = bob_client.get(url("annotate", campaign), **HX)
    assert 'data-stage="work"' in work.content.decode()
    assert Task.objects.get(pk=shown_task_id(work)).role == Task.Role.REAL
    assert sorted(Vote.objects.values_list("correct", flat=True)) == [False, True]


def test_a_feedback_link_shows_only_the_workers_own_training_answers(make_campaign, bob, bob_client,
                                                                     django_user_model):
    campaign = make_campaign("quality", members=[bob])
    gold = campaign.tasks.order_by("position").first()
    set_gold(gold, role=Task.Role.GOLD, value="good", feedback="secret")
    (other,) = make_annotators(django_user_model, 1, prefix="other")
    other_worker = worker_for_user(other)
    vote = Vote.objects.create(task=gold, worker=other_worker, campaign=campaign, role=Task.Role.GOLD,
                               value={"label": "good"}, correct=True)
    html = bob_client.get(f"{url('annotate', campaign)}?feedback={vote.pk}").content.decode()
    assert "secret" not in html and 'data-role="feedback"' not in html


def test_the_qualification_test_shows_no_answers_and_a_failure_closes_the_campaign(make_campaign, bob, bob_client,
                                                                                    aggregations):
    campaign = make_campaign("quality", members=[bob], qualification_pass_mark=1.0)
    first, second = campaign.tasks.order_by("position")[:2]
    set_gold(first, role=Task.Role.QUALIFICATION, value="good", feedback="secret one")
    set_gold(second, role=Task.Role.QUALIFICATION, value="bad", feedback="secret two")
    page = bob_client.get(url("annotate", campaign)).content.decode()
    assert "Qualification test, item 1 of 2" in page and "100% right" in page
    response = bob_client.post(url("annotate-submit", campaign), {"task": first.pk, "label": "bad"}, **HX)
    html = response.content.decode()
    assert response.status_code == 200 and "secret" not in html and 'data-role="feedback"' not in html
    assert "item 2 of 2" in html
    response = bob_client.post(url("annotate-submit", campaign), {"task": second.pk, "label": "bad"}, **HX)
    html = response.content.decode()
    assert 'data-stage="failed"' in html and "pass mark" in html and "secret" not in html


def test_the_end_of_the_work_is_said_plainly(make_campaign, bob, bob_client, aggregations):
    campaign = make_campaign("quality", members=[bob], collection=make_collection(name="two", n=2))
    for _ in range(2):
        response = bob_client.post(url("annotate-submit", campaign),
                                   {"task": shown_task_id(bob_client.get(url("annotate", campaign))), "label": "good"})
        assert response.status_code == 302
    html = bob_client.get(url("annotate", campaign)).content.decode()
    assert 'data-stage="done"' in html and "no more tasks" in html
    assert re.search(r'data-role="done">2<', html) and re.search(r'data-role="remaining">0<', html)


# --- other kinds ----------------------------------------------------------------------------------


def test_candidate_grids_post_every_rating_and_stay_within_a_fixed_number_of_queries(
    make_campaign, bob, bob_client, aggregations, django_assert_max_num_queries
):
    collection = make_collection(name="candidates", n=4, captions_per_image=3)
    campaign = make_campaign("relevance_fluency", members=[bob], collection=collection)
    bob_client.get(url("annotate", campaign))  # reserve, create the assignment
    with django_assert_max_num_queries(11):
        page = bob_client.get(url("annotate", campaign))
    html = page.content.decode()
    task = Task.objects.get(pk=shown_task_id(page))
    order = campaign.kind_spec.candidate_order(task, worker_for_user(bob).pk)
    positions = [html.index(f'data-caption="{cid}"') for cid in order]
    assert positions == sorted(positions)  # shown in the worker's shuffled order
    assert html.count('data-role="rating-row"') == 2 * len(order)

    partial = {f"r-{order[0]}-relevance": "4", f"r-{order[0]}-fluency": "5", "task": task.pk}
    response = bob_client.post(url("annotate-submit", campaign), partial)
    assert response.status_code == 400 and "ratings missing" in response.content.decode()
    assert re.search(rf'name="r-{order[0]}-fluency" value="5" data-key="5" checked', response.content.decode())
    data = {"task": task.pk, **{f"r-{cid}-{dim}": str(n % 5 + 1) for n, cid in enumerate(order)
                                for dim in ("relevance", "fluency")}}
    assert bob_client.post(url("annotate-submit", campaign), data).status_code == 302
    ratings = Vote.objects.get().value["ratings"]
    assert ratings == {str(cid): {"relevance": n % 5 + 1, "fluency": n % 5 + 1} for n, cid in enumerate(order)}


def test_the_slider_posts_a_score(make_campaign, bob, bob_client, aggregations):
    campaign = make_campaign("informativeness_score", members=[bob])
    page = bob_client.get(url("annotate", campaign))
    assert 'type="range"' in page.content.decode()
    task_id = shown_task_id(page)
    assert bob_client.post(url("annotate-submit", campaign), {"task": task_id, "score": "140"}).status_code == 400
    assert bob_client.post(url("annotate-submit", campaign), {"task": task_id, "score": "72"}).status_code == 302
    assert Vote.objects.get().value == {"score": 72.0}


def test_skip_gives_another_task_and_returns_the_first_to_the_pool(make_campaign, bob, bob_client):
    campaign = make_campaign("quality", members=[bob])
    first = shown_task_id(bob_client.get(url("annotate", campaign)))
    response = bob_client.post(url("annotate-skip", campaign), {"task": first}, **HX)
    assert response.status_code == 200
    second = shown_task_id(response)
    assert second != first
    assert list(Reservation.objects.values_list("task_id", flat=True)) == [second]
    assert Task.objects.get(pk=first).reserved_count == 0


# --- lists ----------------------------------------------------------------------------------------


def test_the_annotators_campaigns_show_their_progress_with_start_or_continue(make_campaign, bob, bob_client,
                                                                             aggregations, django_user_model,
                                                                             django_assert_max_num_queries):
    fresh = make_campaign("fluency", members=[bob], name="fresh one")
    started = make_campaign("quality", members=[bob], name="started one")
    make_campaign("quality", members=[], name="not mine")
    make_campaign("quality", members=[bob], name="a draft", status="draft")
    bob_client.post(url("annotate-submit", started),
                    {"task": shown_task_id(bob_client.get(url("annotate", started))), "label": "good"})
    with django_assert_max_num_queries(5):
        html = bob_client.get(reverse("home")).content.decode()
    assert "fresh one" in html and "started one" in html
    assert "not mine" not in html and "a draft" not in html
    row = re.search(rf'data-campaign="{started.pk}".*?</li>', html, re.S).group(0)
    assert 'data-role="done">1<' in row and 'data-role="remaining">11<' in row and "Continue" in row
    row = re.search(rf'data-campaign="{fresh.pk}".*?</li>', html, re.S).group(0)
    assert 'data-role="done">0<' in row and "Start" in row and url("annotate", fresh) in row
    listing = bob_client.get(reverse("annotate-list")).content.decode()
    assert "fresh one" in listing and "not mine" not in listing


def test_instructions_are_rendered_as_safe_markdown(make_campaign, bob, bob_client):
    campaign = make_campaign("fluency", members=[bob], instructions=(
        "# How to rate\n\nSay **fluent** when it reads well. <script>alert(1)</script> "
        "[guide](https://example.org/guide) [bad](javascript:alert(1))"))
    html = bob_client.get(url("annotate", campaign)).content.decode()
    drawer = re.search(r'id="instructions".*?</details>', html, re.S).group(0)
    assert "<h1>How to rate</h1>" in drawer and "<strong>fluent</strong>" in drawer
    assert "&lt;script&gt;" in drawer and "<script>alert" not in drawer
    assert 'href="https://example.org/guide"' in drawer and "javascript:" not in drawer.replace("(javascript:", "")
    assert 'href="javascript' not in drawer
    assert Campaign.objects.get(pk=campaign.pk).instructions.startswith("# How")
