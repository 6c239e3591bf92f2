"""Aggregation on hand-checkable vote sets, Dawid-Skene on a planted synthetic set, blocked
workers, degenerate inputs, candidate ratings, sliders and written captions."""
import numpy as np
import pytest

from annotation.aggregation import aggregate_campaign, krippendorff_alpha
from annotation.models import Aggregate, Membership, Task, Vote, Worker
from annotation.routing import worker_for_user

from .conftest import make_annotators, make_collection


def nominal_alpha(units):
    """Krippendorff's alpha (nominal) straight from its definition, independent of the package:
    ``units`` is a list of lists of labels; units with fewer than two values are not pairable."""
    units = [u for u in units if len(u) >= 2]
    n = sum(len(u) for u in units)
    totals = {}
    observed = 0.0
    for u in units:
        counts = {}
        for v in u:
            counts[v] = counts.get(v, 0) + 1
            totals[v] = totals.get(v, 0) + 1
        disagreeing_pairs = sum(counts[c] * counts[k] for c in counts for k in counts if c != k)
        observed += disagreeing_pairs / (len(u) - 1)
    expected = sum(totals[c] * totals[k] for c in totals for k in totals if c != k) / (n * (n - 1))
    return 1 - (observed / n) / expected


def setup(make_campaign, django_user_model, kind, n_items, n_workers, prefix="w", **fields):
    users = make_annotators(django_user_model, n_workers, prefix=prefix)
    collection = make_collection(name=f"{kind} items", n=n_items, **fields.pop("collection_args", {}))
    campaign = make_campaign(kind, collection=collection, members=users, **fields)
    tasks = list(campaign.tasks.filter(role=Task.Role.REAL).order_by("position", "pk"))
    workers = [worker_for_user(u) for u in users]
    return campaign, tasks, workers


def cast(campaign, tasks, workers, table, seconds=None):
    """table[i][j] is worker j's vote value on task i (None: no vote)."""
    votes = []
    for i, row in enumerate(table):
        for j, value in enumerate(row):
            if value is not None:
                votes.append(Vote(task=tasks[i], worker=workers[j], campaign=campaign, role=Task.Role.REAL,
                                  value=value, seconds=seconds[j] if seconds else 2.0))
    Vote.objects.bulk_create(votes)


def labels(campaign, method, part=""):
    rows = Aggregate.objects.filter(task__campaign=campaign, method=method, part=part)
    return {a.task_id: a.label for a in rows}


G, B = {"label": "good"}, {"label": "bad"}


def test_quality_majority_shares_alpha_and_workers(make_campaign, django_user_model):
    campaign, tasks, workers = setup(make_campaign, django_user_model, "quality", 4, 3)
    cast(campaign, tasks, workers, [
        [G, G, G],  # 3 GOOD
        [G, G, B],  # 2 GOOD
        [G, B, B],  # 1 GOOD
        [B, B, B],  # 0 GOOD
    ], seconds=[1.0, 3.0, 5.0])
    stats = aggregate_campaign(campaign.pk)

    expected = {tasks[0].pk: "good", tasks[1].pk: "good", tasks[2].pk: "bad", tasks[3].pk: "bad"}
    assert labels(campaign, "majority") == expected
    assert labels(campaign, "dawid_skene") == expected
    majority = Aggregate.objects.get(task=tasks[1], method="majority")
    assert majority.n_votes == 3 and majority.confidence == pytest.approx(2 / 3)
    assert majority.details["votes"] == {"good": 2, "bad": 1}
    assert stats["seed_figures"]["good_shares"] == {"1+": 0.75, "2+": 0.5, "3+": 0.25}
    # by hand: D_o = 4/12, D_e = 2*6*6/(12*11) = 6/11, alpha = 1 - 11/18 = 7/18
    assert stats["agreement"]["alpha"] == pytest.approx(7 / 18, abs=1e-6)
    assert stats["agreement"]["alpha"] == pytest.approx(
        nominal_alpha([["g"] * 3, ["g", "g", "b"], ["g", "b", "b"], ["b"] * 3]), abs=1e-6)
    assert stats["agreement"]["metric"] == "nominal" and stats["agreement"]["n_items"] == 4
    assert stats["n_votes"] == 12 and stats["n_tasks"] == 4 and stats["n_tasks_aggregated"] == 4
    assert stats["vote_distribution"] == {"bad": 6, "good": 6}
    assert stats["label_distribution"]["majority"] == {"bad": 2, "good": 2}
    assert {"majority", "dawid_skene", "glad", "mace"} <= set(stats["methods"])
    rows = {w["worker"]: w for w in stats["workers"]}
    assert [rows[w.pk]["votes"] for w in workers] == [4, 4, 4]
    assert [rows[w.pk]["agreement_with_consensus"] for w in workers] == [0.75, 1.0, 0.75]
    assert [rows[w.pk]["median_seconds"] for w in workers] == [1.0, 3.0, 5.0]
    assert rows[workers[0].pk]["name"] == "w0" and rows[workers[0].pk]["blocked"] is False
    reliabilities = dict(Membership.objects.filter(campaign=campaign).values_list("worker_id", "reliability"))
    assert all(0 <= reliabilities[w.pk] <= 1 for w in workers)
    assert reliabilities[workers[1].pk] == pytest.approx(rows[workers[1].pk]["reliability"], abs=1e-4)
    assert reliabilities[workers[1].pk] > reliabilities[workers[0].pk]
    campaign.refresh_from_db()
    assert campaign.stats["n_votes"] == 12 and campaign.stats_updated_at is not None


def test_fluency_consistent_rule_and_two_rater_alpha(make_campaign, django_user_model):
    campaign, tasks, workers = setup(make_campaign, django_user_model, "fluency", 4, 2, votes_per_item=2)
    f, n, d = {"label": "fluent"}, {"label": "not_fluent"}, {"label": "difficult"}
    cast(campaign, tasks, workers, [[f, f], [n, n], [f, d], [f, n]])
    stats = aggregate_campaign(campaign.pk)
    assert stats["seed_figures"]["fluency_consistent"] == {"fluent": 1, "not_fluent": 1, "ignored": 2}
    assert labels(campaign, "consistent") == {tasks[0].pk: "fluent", tasks[1].pk: "not_fluent",
                                               tasks[2].pk: None, tasks[3].pk: None}
    assert Aggregate.objects.get(task=tasks[2], method="consistent").details == {"ignored": "difficult"}
    # two raters, nominal: D_o = 4/8, D_e = (64 - 16 - 9 - 1) / 56, alpha = 1 - 28/38 = 10/38
    assert stats["agreement"]["alpha"] == pytest.approx(10 / 38, abs=1e-6)
    assert stats["agreement"]["alpha"] == pytest.approx(
        nominal_alpha([["f", "f"], ["n", "n"], ["f", "d"], ["f", "n"]]), abs=1e-6)


def test_alpha_slot_matrix_equals_the_workers_by_items_matrix():
    """The vote-slot matrix the aggregation builds gives the same alpha as the textbook one."""
    import krippendorff
    import pandas as pd

    rng = np.random.default_rng(3)
    matrix = rng.integers(1, 6, size=(6, 40)).astype(float)
    matrix[rng.random(matrix.shape) < 0.5] = np.nan
    rows = [(t, w, matrix[w, t]) for w in range(6) for t in range(40) if not np.isnan(matrix[w, t])]
    parts = pd.DataFrame(rows, columns=["task", "worker", "label"]).assign(part="", cat=lambda f: f["label"])
    for metric in ("nominal", "ordinal", "interval"):
        ours, _ = krippendorff_alpha(parts, metric)
        assert ours == pytest.approx(krippendorff.alpha(reliability_data=matrix, level_of_measurement=metric),
                                     abs=1e-6)


def test_dawid_skene_recovers_planted_reliabilities(make_campaign, django_user_model):
    accuracies = [0.95, 0.9, 0.85, 0.6, 0.55, 0.5]
    n = 200
    campaign, tasks, workers = setup(make_campaign, django_user_model, "informativeness", n, 6, votes_per_item=6)
    rng = np.random.default_rng(2024)
    truth = rng.choice(["good", "bad"], size=n)
    table = [[None] * 6 for _ in range(n)]
    for j, accuracy in enumerate(accuracies):
        wrong = set(rng.choice(n, size=round((1 - accuracy) * n), replace=False).tolist())  # exact planted rate
        for i in range(n):
            label = truth[i] if i not in wrong else ("bad" if truth[i] == "good" else "good")
            table[i][j] = {"label": label}
    cast(campaign, tasks, workers, table)
    stats = aggregate_campaign(campaign.pk)

    reliability = dict(Membership.objects.filter(campaign=campaign).values_list("worker_id", "reliability"))
    estimated = [reliability[w.pk] for w in workers]
    assert estimated == sorted(estimated, reverse=True), estimated  # the planted order
    assert estimated[0] > 0.9 and estimated[-1] < 0.6
    ordered = {t.pk: truth[i] for i, t in enumerate(tasks)}
    ds, mv = labels(campaign, "dawid_skene"), labels(campaign, "majority")
    ds_accuracy = np.mean([ds[t] == ordered[t] for t in ordered])
    mv_accuracy = np.mean([mv[t] == ordered[t] for t in ordered])
    assert ds_accuracy >= mv_accuracy and ds_accuracy > 0.95
    assert {"glad", "mace"} <= set(stats["methods"])
    glad = labels(campaign, "glad")
    assert np.mean([glad[t] == ordered[t] for t in ordered]) > 0.9


def test_blocked_workers_are_excluded(make_campaign, django_user_model):
    campaign, tasks, workers = setup(make_campaign, django_user_model, "quality", 3, 5)
    cast(campaign, tasks, workers, [[G, G, B, B, B], [B, B, G, G, G], [G, G, G, B, B]])
    Membership.objects.filter(campaign=campaign, worker=workers[3]).update(blocked=True)
    Worker.objects.filter(pk=workers[4].pk).update(blocked=True)
    stats = aggregate_campaign(campaign.pk)
    assert labels(campaign, "majority") == {tasks[0].pk: "good", tasks[1].pk: "bad", tasks[2].pk: "good"}
    assert (stats["n_votes"], stats["n_votes_used"], stats["n_votes_excluded"]) == (15, 9, 6)
    assert Aggregate.objects.get(task=tasks[0], method="majority").n_votes == 3
    rows = {w["worker"]: w for w in stats["workers"]}
    assert rows[workers[3].pk]["blocked"] and rows[workers[4].pk]["blocked"]
    assert rows[workers[3].pk]["reliability"] is None and rows[workers[3].pk]["votes"] == 3
    assert rows[workers[3].pk]["agreement_with_consensus"] == 0.0  # B, G, B against good, bad, good
    assert rows[workers[0].pk]["agreement_with_consensus"] == 1.0
    assert not rows[workers[0].pk]["blocked"]

    # unblocking and re-running brings their votes back; the rows are updated, not duplicated
    Membership.objects.filter(campaign=campaign).update(blocked=False)
    Worker.objects.filter(pk=workers[4].pk).update(blocked=False)
    aggregate_campaign(campaign.pk)
    assert labels(campaign, "majority") == {tasks[0].pk: "bad", tasks[1].pk: "good", tasks[2].pk: "good"}
    assert Aggregate.objects.filter(task=tasks[0], method="majority").count() == 1


def test_stale_aggregates_are_removed(make_campaign, django_user_model):
    campaign, tasks, workers = setup(make_campaign, django_user_model, "quality", 2, 2)
    cast(campaign, tasks, workers, [[G, G], [B, G]])
    aggregate_campaign(campaign.pk)
    assert Aggregate.objects.filter(task=tasks[1]).exists()
    Vote.objects.filter(task=tasks[1]).delete()
    stats = aggregate_campaign(campaign.pk)
    assert not Aggregate.objects.filter(task=tasks[1]).exists()
    assert stats["n_tasks_aggregated"] == 1


def test_degenerate_inputs_do_not_crash(make_campaign, django_user_model):
    campaign, tasks, workers = setup(make_campaign, django_user_model, "quality", 3, 1)
    empty = aggregate_campaign(campaign.pk)
    assert empty["n_votes"] == 0 and empty["agreement"]["alpha"] is None
    assert empty["seed_figures"]["good_shares"] == {"1+": None, "2+": None, "3+": None}
    assert not Aggregate.objects.filter(task__campaign=campaign).exists()

    cast(campaign, tasks, workers, [[G], [B], [G]])  # one worker
    stats = aggregate_campaign(campaign.pk)
    ds = Aggregate.objects.get(task=tasks[1], method="dawid_skene")
    assert ds.label == "bad" and ds.details["fallback"] == "majority" and "one worker" in ds.details["reason"]
    assert stats["agreement"]["alpha"] is None and stats["agreement"]["n_items"] == 0
    assert any("one worker" in note for note in stats["notes"])
    assert stats["workers"][0]["reliability"] is None

    assert aggregate_campaign(10 ** 9) == {}  # a campaign deleted after the run was queued


def test_one_label_only_falls_back_and_alpha_is_null(make_campaign, django_user_model):
    campaign, tasks, workers = setup(make_campaign, django_user_model, "informativeness", 2, 2)
    cast(campaign, tasks, workers, [[G, G], [G, G]])
    stats = aggregate_campaign(campaign.pk)
    assert labels(campaign, "dawid_skene") == {tasks[0].pk: "good", tasks[1].pk: "good"}
    assert Aggregate.objects.get(task=tasks[0], method="dawid_skene").details["fallback"] == "majority"
    assert stats["agreement"]["alpha"] is None and stats["agreement"]["n_items"] == 2


def test_slider_mean_side_and_interval_alpha(make_campaign, django_user_model):
    campaign, tasks, workers = setup(make_campaign, django_user_model, "informativeness_score", 2, 3)
    cast(campaign, tasks, workers, [[{"score": 20}, {"score": 80}, {"score": 60}],
                                    [{"score": 10}, {"score": 30}, {"score": 20}]])
    stats = aggregate_campaign(campaign.pk)
    mean = Aggregate.objects.get(task=tasks[0], method="mean")
    assert mean.label == pytest.approx(160 / 3, abs=1e-3)
    assert mean.details["std"] == pytest.approx(np.std([20, 80, 60]), abs=1e-3)
    assert labels(campaign, "majority") == {tasks[0].pk: "good", tasks[1].pk: "bad"}
    assert stats["seed_figures"]["likert"]["score"]["mean"] == pytest.approx(220 / 6, abs=1e-3)
    assert stats["seed_figures"]["likert"]["score"]["std"] == pytest.approx(np.std([20, 80, 60, 10, 30, 20]),
                                                                            abs=1e-3)
    assert stats["agreement"]["metric"] == "interval"
    import krippendorff
    assert stats["agreement"]["alpha"] == pytest.approx(krippendorff.alpha(
        reliability_data=[[20, 10], [80, 30], [60, 20]], level_of_measurement="interval"), abs=1e-6)
    assert stats["vote_distribution"] == {"10-19": 1, "20-29": 2, "30-39": 1, "60-69": 1, "80-89": 1}


def test_candidate_ratings_mean_bradley_terry_and_per_dimension_alpha(make_campaign, django_user_model):
    campaign, tasks, workers = setup(make_campaign, django_user_model, "relevance_fluency", 1, 2,
                                     collection_args={"captions_per_image": 3})
    (task,) = tasks
    a, b, c = (str(x) for x in task.candidates)

    def vote(ra, rb, rc, fl):
        return {"ratings": {a: {"relevance": ra, "fluency": fl}, b: {"relevance": rb, "fluency": fl},
                            c: {"relevance": rc, "fluency": fl}}}

    cast(campaign, tasks, workers, [[vote(5, 3, 1, 4), vote(4, 4, 2, 4)]])
    stats = aggregate_campaign(campaign.pk)
    mean = {x.part: x for x in Aggregate.objects.filter(task=task, method="mean")}
    assert mean[f"{a}:relevance"].label == 4.5 and mean[f"{a}:relevance"].details["std"] == 0.5
    assert mean[f"{c}:relevance"].label == 1.5 and mean[f"{b}:fluency"].label == 4
    bt = {x.part: x for x in Aggregate.objects.filter(task=task, method="bradley_terry")}
    # relevance pairs: a>b, a>c, b>c (worker 0); a=b skipped, a>c, b>c (worker 1)
    assert bt[f"{a}:relevance"].details["rank"] == 1 and bt[f"{c}:relevance"].details["rank"] == 3
    assert bt[f"{a}:relevance"].label > bt[f"{b}:relevance"].label > bt[f"{c}:relevance"].label
    assert not any(p.endswith(":fluency") for p in bt)  # all fluency ratings tied: no comparisons
    likert = stats["seed_figures"]["likert"]
    assert likert["relevance"]["mean"] == pytest.approx(19 / 6, abs=1e-3)
    assert likert["fluency"] == {"mean": 4.0, "std": 0.0, "n": 6}
    assert set(stats["agreement"]["per_part"]) == {"relevance", "fluency"}
    assert stats["agreement"]["per_part"]["fluency"] is None  # one value everywhere
    assert stats["agreement"]["metric"] == "ordinal"


def test_written_captions_rover_and_representative(make_campaign, django_user_model):
    campaign, tasks, workers = setup(make_campaign, django_user_model, "write", 1, 3)
    cast(campaign, tasks, workers, [[{"text": "a dog runs on the beach"}, {"text": "a dog running on the beach"},
                                     {"text": "sunset over the sea"}]])
    stats = aggregate_campaign(campaign.pk)
    rover = Aggregate.objects.get(task=tasks[0], method="rover")
    assert "dog" in rover.label and rover.n_votes == 3
    assert rover.details["representative"]["text"] in ("a dog runs on the beach", "a dog running on the beach")
    assert stats["agreement"]["alpha"] is None and stats["methods"] == ["rover"]


def test_rejected_and_quarantined_work_is_not_evidence(make_campaign, django_user_model):
    from annotation.models import Assignment

    campaign, tasks, workers = setup(make_campaign, django_user_model, "quality", 2, 3, prefix="rq")
    cast(campaign, tasks, workers, [[G, G, B], [B, B, G]])
    rejected = Assignment.objects.create(campaign=campaign, worker=workers[0], state=Assignment.State.REJECTED)
    Vote.objects.filter(worker=workers[0]).update(assignment=rejected)
    Vote.objects.filter(worker=workers[1], task=tasks[1]).update(quarantined=True)
    aggregate_campaign(campaign.pk)
    # worker 0's votes are gone (rejected) and worker 1's vote on task 1 is quarantined
    assert labels(campaign, "majority") == {tasks[0].pk: labels(campaign, "majority")[tasks[0].pk],
                                            tasks[1].pk: "good"}
    assert Aggregate.objects.get(task=tasks[0], method="majority").n_votes == 2
    assert Aggregate.objects.get(task=tasks[1], method="majority").n_votes == 1
