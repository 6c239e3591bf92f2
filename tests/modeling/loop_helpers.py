"""Fluency campaigns over tests/modeling/fluency_corpus.py's pool, and votes that two raters give them
(each agreeing with the sentence's true label), for the encoder trainer and learning-loop tests."""
from __future__ import annotations

from annotation import services
from annotation.models import Task, Vote
from annotation.routing import worker_for_user
from curation.models import Caption, Collection, Image
from tests.annotation.conftest import make_annotators

from .fluency_corpus import labelled_pool


def make_pool_campaign(user, django_user_model, n: int = 300, seed: int = 0, name: str = "loop fluency",
                       fluent_share: float = 0.6):
    """A running fluency campaign (2 votes per item) over ``n`` pool sentences, none voted yet.
    Returns (campaign, {task id: true label}, raters)."""
    collection = Collection.objects.create(name=f"{name} photos", source_kind=Collection.SourceKind.WEB_ALT_TEXT)
    truth_by_caption = {}
    for k, (text, label) in enumerate(labelled_pool(n, fluent_share=fluent_share, seed=seed)):
        image = Image.objects.create(collection=collection, sha256=f"{seed:08x}{k + 1:056x}", width=640, height=480,
                                     format="JPEG", external_id=f"pool-{seed}-{k}", status=Image.Status.READY)
        caption = Caption.objects.create(image=image, text=text, origin=Caption.Origin.ALT_TEXT, language="en")
        truth_by_caption[caption.pk] = label
    raters = make_annotators(django_user_model, 2, prefix=f"{name.split()[0]}r{seed}")
    campaign = services.campaign_create(name=name, kind="fluency", selection={"collection": collection.pk},
                                        user=user, members=raters, status="running", votes_per_item=2)
    truth = {t.pk: truth_by_caption[t.caption_id] for t in campaign.tasks.filter(role=Task.Role.REAL)}
    return campaign, truth, raters


def vote(campaign, truth: dict, task_ids, raters) -> None:
    """Both raters vote each task's true label; the tasks are done, as routing would leave them."""
    workers = [worker_for_user(u) for u in raters]
    votes = []
    for task_id in task_ids:
        value = "fluent" if truth[task_id] == 1 else "not_fluent"
        votes += [Vote(task_id=task_id, worker=w, campaign=campaign, role=Task.Role.REAL, value={"label": value},
                       seconds=2.0) for w in workers]
    Vote.objects.bulk_create(votes)
    Task.objects.filter(pk__in=list(task_ids)).update(status=Task.Status.DONE, votes_count=2)


def next_tasks(campaign, count: int) -> list[int]:
    """The open tasks routing serves next (priority, then id)."""
    return list(Task.objects.filter(campaign=campaign, role=Task.Role.REAL, status=Task.Status.OPEN)
                .order_by("priority", "pk").values_list("pk", flat=True)[:count])
