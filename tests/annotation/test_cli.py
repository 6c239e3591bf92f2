"""manage.py campaign: create from a selection, list, status, aggregate, export-votes, and clear
errors on bad input."""
import csv
import io
import sys
import types

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Campaign, Membership, Task, Vote
from annotation.routing import next_task, submit_vote, worker_for_user

from .conftest import make_annotators

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def run(*args) -> str:
    out = io.StringIO()
    call_command("campaign", *args, stdout=out)
    return out.getvalue()


def _vote_all(campaign, user, value):
    worker = worker_for_user(user)
    n = 0
    while (served := next_task(campaign, worker)).task is not None:
        submit_vote(campaign, worker, served.task.pk, value, seconds=1.0)
        n += 1
    return n


def test_create_from_a_collection_by_name_with_a_sample_and_members(collection, bob, django_user_model):
    make_annotators(django_user_model, 1, prefix="erin")
    out = run("create", "--name", "Fluency CLI", "--kind", "fluency", "--collection", collection.name,
              "--sample", "5", "--seed", "7", "--votes-per-item", "2", "--members", "bob, erin0", "--start",
              "--instructions", "Is it *fluent*?")
    campaign = Campaign.objects.get(name="Fluency CLI")
    assert f"Campaign #{campaign.pk} 'Fluency CLI': fluency, 5 tasks, 2 votes per item, 2 members, running." in out
    assert campaign.status == "running" and campaign.tasks.count() == 5 and campaign.votes_per_item == 2
    assert campaign.selection == {"collection": collection.pk, "sample": 5, "seed": 7}
    assert campaign.instructions == "Is it *fluent*?"
    assert set(Membership.objects.filter(campaign=campaign).values_list("worker__user__username", flat=True)) == {
        "bob", "erin0"}


def test_create_by_collection_id_as_a_draft_with_instructions_from_a_file(collection, tmp_path):
    path = tmp_path / "instructions.md"
    path.write_text("# Write one sentence\n\nSay who, what and where.", encoding="utf-8")
    run("create", "--name", "Write", "--kind", "write", "--collection", str(collection.pk),
        "--instructions", f"@{path}")
    campaign = Campaign.objects.get(name="Write")
    assert campaign.status == "draft" and campaign.tasks.count() == 12
    assert campaign.instructions.startswith("# Write one sentence")


@pytest.mark.parametrize("args,message", [
    (["--kind", "sculpture"], "Unknown kind 'sculpture'"),
    (["--collection", "no such photos"], "No collection with id or name 'no such photos'"),
    (["--score-min", "0.3", "--score-max", "0.7"], "needs --run and --step"),
    (["--run", "1", "--step", "0", "--score-min", "0.7", "--score-max", "0.3"], "The score range is empty"),
    (["--members", "bob,ghost"], "No active user named ghost."),
    (["--votes-per-item", "0"], "Votes per item must be between 1 and 50. (--votes-per-item)"),
    (["--run", "999999", "--step", "0"], "That filter run is not a run over this collection. (--run)"),
])
def test_create_refuses_bad_input_with_a_clear_message(collection, bob, args, message):
    base = {"--name": "Bad", "--kind": "quality", "--collection": collection.name}
    for flag, value in zip(args[::2], args[1::2]):
        base[flag] = value
    argv = [x for pair in base.items() for x in pair]
    with pytest.raises(CommandError) as exc:
        run("create", *argv)
    assert message in str(exc.value)
    assert not Campaign.objects.exists()


def test_create_refuses_a_duplicate_name(make_campaign, collection):
    make_campaign("quality", name="Taken")
    with pytest.raises(CommandError, match="already exists"):
        run("create", "--name", "Taken", "--kind", "quality", "--collection", collection.name)


def test_list_shows_progress_votes_and_members(make_campaign, bob):
    campaign = make_campaign("quality", members=[bob], votes_per_item=1, name="Quality list")
    make_campaign("fluency", name="Fluency list", status="draft")
    _vote_all(campaign, bob, "good")
    out = run("list")
    line = next(x for x in out.splitlines() if "Quality list" in x)
    assert "quality" in line and "running" in line and "12/12" in line
    assert line.split()[-2:] == ["12", "1"]
    assert any("Fluency list" in x and "draft" in x and "0/12" in x for x in out.splitlines())


def test_list_says_when_there_are_no_campaigns(db):
    assert "No campaigns yet" in run("list")


def test_status_changes_and_refuses_a_bad_transition(make_campaign):
    campaign = make_campaign("quality", name="Status one")
    assert "is now paused" in run("status", str(campaign.pk), "paused")
    assert Campaign.objects.get(pk=campaign.pk).status == "paused"
    run("status", "Status one", "finished")
    with pytest.raises(CommandError, match="A finished campaign cannot become paused."):
        run("status", str(campaign.pk), "paused")
    with pytest.raises(CommandError, match="No campaign with id or name '424242'"):
        run("status", "424242", "running")
    with pytest.raises(CommandError, match="invalid choice"):
        run("status", str(campaign.pk), "draft")


def test_export_votes_writes_one_row_per_vote(make_campaign, bob, django_user_model, tmp_path):
    (sly,) = make_annotators(django_user_model, 1, prefix="=cmd|")  # a name a spreadsheet would run
    campaign = make_campaign("quality", members=[bob, sly], votes_per_item=2)
    assert _vote_all(campaign, bob, "good") == 12
    assert _vote_all(campaign, sly, "bad") == 12
    out_file = tmp_path / "votes.csv"
    out = run("export-votes", str(campaign.pk), "--out", str(out_file))
    assert f"Wrote 24 votes of campaign #{campaign.pk}" in out
    with out_file.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 24
    assert {r["label"] for r in rows if r["worker_name"] == "bob"} == {"good"}
    sly_rows = [r for r in rows if r["worker_name"].startswith("'")]
    assert len(sly_rows) == 12 and sly_rows[0]["worker_name"] == "'=cmd|0"
    assert sly_rows[0]["value"] == '{"label": "bad"}'
    vote = Vote.objects.order_by("pk").first()
    first = rows[0]
    assert int(first["vote"]) == vote.pk and int(first["task"]) == vote.task_id and first["seconds"] == "1.000"
    assert {r["role"] for r in rows} == {"real"}


def test_export_votes_to_stdout_and_a_bad_path(make_campaign, bob, tmp_path):
    campaign = make_campaign("quality", members=[bob], votes_per_item=1)
    worker = worker_for_user(bob)
    submit_vote(campaign, worker, next_task(campaign, worker).task.pk, "bad")
    out = run("export-votes", str(campaign.pk), "--out", "-")
    assert out.splitlines()[0].startswith("vote,task,role,image,caption,worker")
    assert len(out.strip().splitlines()) == 2
    with pytest.raises(CommandError, match="Cannot write"):
        run("export-votes", str(campaign.pk), "--out", str(tmp_path / "missing" / "dir" / "votes.csv"))


def test_aggregate_prints_agreement_and_label_counts(make_campaign, bob, monkeypatch):
    """With a stand-in aggregation, what the command prints is exactly what it read from stats."""
    campaign = make_campaign("quality", members=[bob])
    calls = []

    def fake(campaign_id):
        calls.append(campaign_id)
        stats = {"n_votes": 30, "n_tasks": 12, "n_tasks_aggregated": 10,
                 "agreement": {"alpha": 0.4567, "metric": "nominal", "per_part": {"label": 0.4567}, "n_items": 10},
                 "label_distribution": {"majority": {"good": 7, "bad": 3}, "dawid_skene": {"good": 6, "bad": 4}}}
        Campaign.objects.filter(pk=campaign_id).update(stats=stats)
        return stats

    monkeypatch.setitem(sys.modules, "annotation.aggregation", types.SimpleNamespace(aggregate_campaign=fake))
    out = run("aggregate", str(campaign.pk))
    assert calls == [campaign.pk]
    assert "30 votes on 10 of 12 tasks aggregated" in out
    assert "Krippendorff's alpha (nominal): 0.457 over 10 items" in out
    assert "majority: good 7, bad 3" in out and "dawid_skene: good 6, bad 4" in out


def test_aggregate_runs_the_real_aggregation(make_campaign, django_user_model):
    users = make_annotators(django_user_model, 3)
    campaign = make_campaign("quality", members=users, votes_per_item=3)
    for user in users:
        _vote_all(campaign, user, "good")
    out = run("aggregate", campaign.name)
    assert "36 votes on" in out
    assert "majority: good 12" in out
    assert Task.objects.filter(campaign=campaign, aggregates__method="majority").distinct().count() == 12


def test_a_missing_subcommand_is_an_error():
    with pytest.raises(CommandError):
        call_command("campaign")


def test_create_with_the_question_annotators_read(collection):
    run("create", "--name", "Asked", "--kind", "fluency", "--collection", collection.name,
        "--question", "Would a native speaker write this caption?", "--instructions", "Curator notes: seed 002 Table 2.")
    campaign = Campaign.objects.get(name="Asked")
    assert campaign.annotator_question == "Would a native speaker write this caption?"
    with pytest.raises(CommandError, match="300 characters"):
        run("create", "--name", "Too long", "--kind", "fluency", "--collection", collection.name,
            "--question", "Is it fluent? " * 30)
