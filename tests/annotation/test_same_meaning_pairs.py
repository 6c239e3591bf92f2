"""Same-meaning pairs campaigns (issue 35, item 6): people judge the candidate pairs of a run's semantic-duplicates
step, and their answers fit the step's threshold, with precision and recall on the judged pairs.

Alice (curator) ran the step over a desk's captions: paraphrases, and captions with the same words and another
meaning. She sends the candidate pairs to three annotators, fits the threshold from their answers, and applies
it to the pipeline. A tie and a single judge are reported and left out, never a crash."""
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.aggregation import aggregate_campaign
from annotation.models import Campaign, Task, Vote
from annotation.routing import worker_for_user
from annotation.same_meaning import pairs_fit
from curation import services as curation_services
from curation.models import Caption, Collection, FilterDecision, FilterRun, Image
from curation.pipeline.executor import validate_steps
from curation.pipeline.semantic_dups import SemanticDuplicates

from .conftest import make_annotators

PAIRS = [  # (same meaning?, caption a, caption b)
    (True, "A dog catches a frisbee in the park.", "In the park a dog catches a frisbee."),
    (True, "The mayor cuts the ribbon at the opening of the new library.",
     "At the opening of the new library the mayor cuts the ribbon."),
    (True, "Fans celebrate in the stands after the final whistle.",
     "After the final whistle, fans celebrate in the stands."),
    (True, "Boats are moored in a small harbour at dawn.", "At dawn boats are moored in a small harbour."),
    (True, "Students listen to a lecture in a crowded hall.", "In a crowded hall, students are listening to a lecture."),
    (False, "A horse pulls a man through the mud.", "A man pulls a horse through the mud."),
    (False, "The shop is open on Sunday morning.", "The shop is not open on Sunday morning."),
    (False, "Hot soup served in a white bowl.", "Cold soup served in a white bowl."),
    (False, "Two dogs play with a ball in the yard.", "Three dogs play with a ball in the yard."),
    (False, "A girl plays the violin on stage.", "A girl plays the piano on stage."),
    (False, "The bride kisses the groom under the arch.", "The groom kisses the bride under the arch."),
]
TRUTH = {frozenset((a, b)): same for same, a, b in PAIRS}


@pytest.fixture
def pairs_run(db, alice):
    """A finished run whose only step is semantic_duplicates (the defaults), its decisions as the step made them."""
    collection = Collection.objects.create(name="desk")
    steps = [{"filter": "semantic_duplicates"}]
    pipeline = curation_services.pipeline_save(name="duplicates", steps=steps, user=alice)
    run = FilterRun.objects.create(collection=collection, pipeline=pipeline, snapshot=validate_steps(steps),
                                   status=FilterRun.Status.DONE)
    rows = []
    for i, text in enumerate(t for _, a, b in PAIRS for t in (a, b)):
        image = Image.objects.create(collection=collection, external_id=f"d{i}", sha256=f"{i:064x}",
                                     status=Image.Status.READY)
        caption = Caption.objects.create(image=image, text=text, origin=Caption.Origin.ALT_TEXT)
        rows.append({"caption_id": caption.pk, "image_id": image.pk, "text": text})
    decisions = SemanticDuplicates().decide_run(rows)
    FilterDecision.objects.bulk_create([
        FilterDecision(run=run, step=0, filter_name="semantic_duplicates", image_id=row["image_id"],
                       caption_id=row["caption_id"], outcome=decisions[row["caption_id"]].outcome,
                       reason=decisions[row["caption_id"]].reason, score=decisions[row["caption_id"]].score,
                       details=decisions[row["caption_id"]].details) for row in rows])
    return run


def create(client, source_run, **extra):
    body = {"name": "Same meaning?", "kind": "same_meaning", "collection": source_run.collection_id,
            "run": source_run.pk, "step": 0, "status": "running", **extra}
    return client.post("/api/campaigns/", body, content_type="application/json")


def truth_of(task: Task) -> bool:
    texts = dict(Caption.objects.filter(pk__in=task.candidates).values_list("pk", "text"))
    return TRUTH.get(frozenset(texts.values()), False)  # a pair across topics is not the same meaning


def vote(task, users, labels):
    for user, label in zip(users, labels):
        Vote.objects.create(task=task, worker=worker_for_user(user), campaign=task.campaign, value={"label": label})


@pytest.fixture
def judges(django_user_model):
    return make_annotators(django_user_model, 3, prefix="judge")


@pytest.fixture
def campaign(pairs_run, alice_client, judges):
    response = create(alice_client, pairs_run, members=[u.username for u in judges])
    assert response.status_code == 201, response.content
    return Campaign.objects.get(pk=response.json()["id"])


def test_the_campaign_has_one_task_per_candidate_pair_with_the_steps_score(campaign, pairs_run):
    tasks = list(campaign.tasks.all())
    pairs = {frozenset(t.candidates) for t in tasks}
    assert len(pairs) == len(tasks) >= len(PAIRS)
    assert all(len(t.candidates) == 2 and t.model_score is not None and t.source_decision for t in tasks)
    assert sum(truth_of(t) for t in tasks) == 5  # every written paraphrase is a candidate


def test_the_campaign_form_creates_a_pairs_campaign_from_the_cluster_pages_link(pairs_run, alice_client, judges):
    clusters = alice_client.get(reverse("run-step-clusters", args=[pairs_run.pk, 0])).content.decode()
    link = re.search(r'href="([^"]+)" data-role="pairs-campaign"', clusters).group(1).replace("&amp;", "&")
    form = alice_client.get(link).content.decode()
    assert re.search(r'value="same_meaning"[^>]*checked', form)
    response = alice_client.post(reverse("campaign-create"), {
        "name": "Pairs from the form", "kind": "same_meaning", "collection": pairs_run.collection_id,
        "run": pairs_run.pk, "step": 0, "members": [u.pk for u in judges], "start": "on", "priority": "uncertain",
        "backend": "inhouse", "seed": 0})
    assert response.status_code == 302, response.content.decode()[:3000]
    campaign = Campaign.objects.get(name="Pairs from the form")
    assert campaign.tasks.count() >= len(PAIRS) and campaign.kind == "same_meaning"


def test_the_command_creates_a_pairs_campaign(pairs_run, capsys):
    call_command("campaign", "create", "--name", "Pairs from the CLI", "--kind", "same_meaning", "--collection",
                 str(pairs_run.collection_id), "--run", str(pairs_run.pk), "--step", "0")
    campaign = Campaign.objects.get(name="Pairs from the CLI")
    assert campaign.tasks.count() >= len(PAIRS) and all(len(t.candidates) == 2 for t in campaign.tasks.all())


def test_a_run_without_a_duplicates_step_or_without_a_step_is_refused(pairs_run, alice_client):
    no_step = create(alice_client, pairs_run, name="no step", step=None)
    assert no_step.status_code == 400 and "semantic-duplicates step" in no_step.json()["step"][0]
    no_run = create(alice_client, pairs_run, name="no run", run=None, step=None)
    assert no_run.status_code == 400 and "needs a filter run" in no_run.json()["run"][0]


def test_the_work_page_shows_both_captions_and_takes_an_answer(campaign, client, judges):
    client.force_login(judges[0])
    html = client.get(reverse("annotate", args=[campaign.pk])).content.decode()
    task_id = int(re.search(r'name="task" value="(\d+)"', html).group(1))
    task = Task.objects.get(pk=task_id)
    shown = re.findall(r'data-role="pair-caption" data-caption="(\d+)"', html)
    assert [int(c) for c in shown] == task.candidates and "say the same thing" in html
    response = client.post(reverse("annotate-submit", args=[campaign.pk]), {"task": task_id, "label": "same"})
    assert response.status_code == 302
    assert Vote.objects.get(task=task).value == {"label": "same"}


def test_without_answers_the_fit_says_so_on_the_page_the_api_and_the_cli(campaign, alice_client, capsys):
    fit = pairs_fit(campaign)
    assert not fit.usable and "No pair has a verdict yet" in fit.messages[-1]
    page = alice_client.get(reverse("campaign-pairs-fit", args=[campaign.pk]))
    assert page.status_code == 200 and "No pair has a verdict yet" in page.content.decode()
    api = alice_client.get(f"/api/campaigns/{campaign.pk}/pairs-fit/")
    assert api.status_code == 200 and api.json()["threshold"] is None
    applied = alice_client.post(f"/api/campaigns/{campaign.pk}/pairs-fit/", {}, content_type="application/json")
    assert applied.status_code == 400 and "Nothing to apply" in str(applied.json())
    call_command("campaign", "fit-pairs", str(campaign.pk))
    assert "No pair has a verdict yet" in capsys.readouterr().out


def test_ties_and_single_judges_are_reported_and_left_out_of_the_fit(campaign, judges):
    tasks = list(campaign.tasks.order_by("pk"))
    tie, single, rest = tasks[0], tasks[1], tasks[2:]
    vote(tie, judges[:2], ["same", "different"])
    vote(tie, judges[2:], ["unsure"])  # "can't tell" counts for neither side
    vote(single, judges[:1], ["same"])
    for task in rest:
        vote(task, judges, ["same" if truth_of(task) else "different"] * 3)
    fit = pairs_fit(campaign)
    assert fit.judged.ties == [tie.pk] and fit.judged.single == [single.pk]
    assert len(fit.judged.used) == len(rest)
    text = " ".join(fit.messages)
    assert "(a tie): not used" in text and f"#{tie.pk}" in text
    assert "single judge" in text and f"#{single.pk}" in text


def test_the_answers_fit_a_threshold_with_precision_and_recall_and_apply_to_the_pipeline(campaign, pairs_run, judges,
                                                                                      alice_client, capsys):
    for task in campaign.tasks.all():
        verdict = "same" if truth_of(task) else "different"
        vote(task, judges, [verdict, verdict, "different" if verdict == "same" else verdict])
    aggregate_campaign(campaign.pk)  # the campaign's own aggregation and pages take the kind like any other
    for name in ("campaign-detail", "campaign-results"):
        page = alice_client.get(reverse(name, args=[campaign.pk]))
        assert page.status_code == 200, name
    assert "Fit the threshold" in alice_client.get(reverse("campaign-detail", args=[campaign.pk])).content.decode()
    fit = pairs_fit(campaign)
    assert fit.usable and fit.weights is not None  # ten or more judged pairs: the weights are fitted too
    assert fit.precision >= 0.9 and fit.recall >= 0.5
    assert fit.cv_precision is not None
    page = alice_client.get(reverse("campaign-pairs-fit", args=[campaign.pk])).content.decode()
    assert 'data-role="threshold"' in page and "<svg" in page and 'data-role="apply-fit"' in page
    api = alice_client.get(f"/api/campaigns/{campaign.pk}/pairs-fit/").json()
    assert api["threshold"] == fit.threshold and api["precision"] == fit.precision
    call_command("campaign", "fit-pairs", str(campaign.pk))
    assert f"threshold {fit.threshold:.3f}" in capsys.readouterr().out

    response = alice_client.post(reverse("campaign-pairs-fit", args=[campaign.pk]), {})
    assert response.status_code == 302
    pairs_run.pipeline.refresh_from_db()
    params = pairs_run.pipeline.steps[0]["params"]
    assert params["threshold"] == fit.threshold and params["weights"] == fit.weights and params.get("drop_at") is None
    applied = alice_client.post(f"/api/campaigns/{campaign.pk}/pairs-fit/", {"drop": True},
                                content_type="application/json")
    assert applied.status_code == 200 and applied.json()["params"]["drop_at"] == fit.threshold
    SemanticDuplicates(applied.json()["params"])  # a valid step


def test_only_a_same_meaning_campaign_has_a_fit(make_campaign, alice_client):
    other = make_campaign("fluency")
    assert alice_client.get(reverse("campaign-pairs-fit", args=[other.pk])).status_code == 404
    api = alice_client.get(f"/api/campaigns/{other.pk}/pairs-fit/")
    assert api.status_code == 400 and "Only a same-meaning campaign" in str(api.json())
