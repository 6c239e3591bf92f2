"""``manage.py jobs``: unfinished long jobs and their workers' heartbeats; ``jobs retry KIND ID`` re-sends a lost one."""
from django.core.management.base import BaseCommand, CommandError

from captionlab import heartbeat
from captionlab.jobs import retry_if_lost


class Command(BaseCommand):
    help = ("List unfinished imports, filter runs, releases and exports with their worker's heartbeat "
            "(alive / lost / waiting); `jobs retry KIND ID` re-sends the work of a job whose worker was lost.")

    def add_arguments(self, parser):
        parser.add_argument("action", nargs="?", choices=["list", "retry"], default="list")
        parser.add_argument("kind", nargs="?", choices=heartbeat.KINDS)
        parser.add_argument("id", nargs="?", type=int)

    def handle(self, *args, action, kind, id, **options):
        if action == "retry":
            if not kind or id is None:
                raise CommandError("retry needs a kind and an id, e.g. `manage.py jobs retry run 12`.")
            obj = heartbeat.job_object(kind, id)
            if obj is None:
                raise CommandError(f"No {kind} #{id}.")
            done, message = retry_if_lost(kind, obj)
            if not done:
                raise CommandError(message)
            self.stdout.write(message)
            return
        rows = 0
        for name in heartbeat.KINDS:
            if name == "aggregation":
                continue  # no status of its own; shown on the campaign page while a pass runs
            model = _model(name)
            for obj in model.objects.exclude(status__in=heartbeat.FINISHED).order_by("pk"):
                health = heartbeat.job_health(name, obj)
                since = f"{health.seconds_since_beat:.0f} s since the last beat" if health.seconds_since_beat is not None else "never started"
                self.stdout.write(f"{name:<8} #{obj.pk:<6} {obj.status:<12} worker {health.state or 'done':<8} {since}")
                rows += 1
        if not rows:
            self.stdout.write("No unfinished jobs.")


def _model(kind):
    from annotation.models import Campaign
    from curation.models import FilterRun, ImportJob
    from releases.models import Release, ReleaseExport

    return {"import": ImportJob, "run": FilterRun, "release": Release, "export": ReleaseExport,
            "aggregation": Campaign}[kind]
