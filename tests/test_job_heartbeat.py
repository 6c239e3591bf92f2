"""Heartbeats of long jobs (captionlab/heartbeat.py): alive while beating, lost after the setting's
silence, waiting when never started; the pages, the API and `manage.py jobs` say which."""
import time
from io import StringIO

import pytest
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.urls import reverse

from captionlab import heartbeat
from curation.models import Collection, ImportJob

pytestmark = pytest.mark.django_db


@pytest.fixture
def job():
    collection = Collection.objects.create(name="beats")
    job = ImportJob.objects.create(collection=collection, kind="tsv", source_name="cc.tsv", status="running")
    cache.delete(heartbeat.beat_key("import", job.pk))  # a beat of an earlier test database's job with this pk
    return job


def test_a_running_job_is_waiting_then_alive_then_lost_and_a_finished_one_is_neither(job, settings):
    settings.JOB_WORKER_LOST_AFTER_S = 120
    assert heartbeat.job_health("import", job).state == "waiting"
    heartbeat.beat("import", job.pk)
    assert heartbeat.job_health("import", job).state == "alive"
    heartbeat.beat("import", job.pk, now=time.time() - 121)
    health = heartbeat.job_health("import", job)
    assert health.lost and health.seconds_since_beat >= 120
    job.status = "done"
    assert heartbeat.job_health("import", job).state == ""


def test_a_task_beats_while_it_runs_and_once_more_when_it_ends(job, settings):
    settings.JOB_HEARTBEAT_SECONDS = 0.05

    class FakeTask:
        name = "curation.run_import"

    other = ImportJob.objects.create(collection=job.collection, kind="tsv", source_name="other.tsv", status="running")
    cache.delete(heartbeat.beat_key("import", other.pk))

    def beats_of(pk, after, count=1):
        """Waits (no fixed sleep: a busy machine may be slow) for ``count`` beats after ``after``."""
        for _ in range(count):
            deadline = time.monotonic() + 30
            while heartbeat.last_beat("import", pk) == after:
                assert time.monotonic() < deadline, "the beat thread stopped beating"
                time.sleep(0.01)
            after = heartbeat.last_beat("import", pk)
        return after

    heartbeat.on_task_prerun(sender=FakeTask, args=[other.pk])  # runs throughout: its beats mark the rounds
    heartbeat.on_task_prerun(sender=FakeTask, args=[job.pk])
    beats_of(job.pk, heartbeat.last_beat("import", job.pk))  # the beat thread keeps beating
    heartbeat.on_task_postrun(sender=FakeTask, args=[job.pk])
    # a round that began before the task ended may beat it once more; two rounds later none can
    mark = beats_of(other.pk, heartbeat.last_beat("import", other.pk), count=2)
    last = heartbeat.last_beat("import", job.pk)
    beats_of(other.pk, mark, count=2)
    heartbeat.on_task_postrun(sender=FakeTask, args=[other.pk])
    assert heartbeat.last_beat("import", job.pk) == last  # it stopped with the task


def test_an_aggregation_pass_is_unfinished_only_while_it_runs(job):
    from annotation.models import Campaign

    campaign = Campaign.objects.create(name="beating", kind="fluency", collection=job.collection)

    class FakeTask:
        name = "annotation.aggregate_campaign"

    assert not heartbeat.unfinished("aggregation", campaign)
    heartbeat.on_task_prerun(sender=FakeTask, args=[campaign.pk])
    assert heartbeat.unfinished("aggregation", campaign)
    heartbeat.on_task_postrun(sender=FakeTask, args=[campaign.pk])
    assert not heartbeat.unfinished("aggregation", campaign)


def test_the_import_page_shows_worker_lost_with_a_retry_button(job, alice_client, settings):
    heartbeat.beat("import", job.pk, now=time.time() - 600)
    page = alice_client.get(reverse("import-detail", args=[job.pk])).content.decode()
    assert 'data-job-health="lost"' in page and "Retry now" in page
    heartbeat.beat("import", job.pk)
    page = alice_client.get(reverse("import-detail", args=[job.pk])).content.decode()
    assert 'data-job-health="lost"' not in page


def test_the_cli_lists_jobs_and_refuses_to_retry_a_live_one(job):
    heartbeat.beat("import", job.pk)
    out = StringIO()
    call_command("jobs", stdout=out)
    assert f"import   #{job.pk}" in out.getvalue() and "alive" in out.getvalue()
    with pytest.raises(CommandError, match="its worker is alive"):
        call_command("jobs", "retry", "import", str(job.pk))
    with pytest.raises(CommandError, match="needs a kind and an id"):
        call_command("jobs", "retry")


def test_without_a_broker_a_job_never_started_can_be_started_again(job, alice_client, settings, eager_celery):
    """The embedded default: a web process that restarted lost its in-memory queue."""
    from unittest import mock

    settings.CELERY_TASK_ALWAYS_EAGER = True
    job.status = "queued"
    job.save(update_fields=["status"])
    page = alice_client.get(reverse("import-detail", args=[job.pk])).content.decode()
    assert 'data-job-health="waiting"' in page and "Start it again" in page
    with mock.patch("curation.tasks.run_import.delay") as delay:
        response = alice_client.post(reverse("job-retry", args=["import", job.pk]))
    assert response.status_code == 302 and delay.call_args.args == (job.pk,)


def test_with_a_broker_a_queued_job_is_left_to_the_workers(job, settings):
    from captionlab.jobs import retry_if_lost

    settings.CELERY_TASK_ALWAYS_EAGER = False
    job.status = "queued"
    assert retry_if_lost("import", job) == (False, "Nothing to retry: it is waiting for a worker.")
