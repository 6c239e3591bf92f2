"""manage.py demo: demo users for each role and a demo collection of real photographs.

Safe to run again: nothing is duplicated, and each run prints fresh passwords.
"""
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from curation import demo
from curation.models import Caption


class Command(BaseCommand):
    help = (
        "Creates the demo users (demo-annotator, demo-annotator-2, demo-curator, demo-admin) with fresh passwords and "
        f"the collection {demo.COLLECTION_NAME!r} of the photographs shipped with scikit-image, "
        "imported through the real ingest. Idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("--base-url", default="http://127.0.0.1:8000",
                            help="where the platform answers, for the login link (default %(default)s)")
        parser.add_argument("--no-wait", action="store_true",
                            help="with real workers, queue the import and return without waiting")
        parser.add_argument("--timeout", type=float, default=600.0,
                            help="seconds to wait for workers to finish the import (default %(default)s)")
        parser.add_argument("--reimport", action="store_true",
                            help="run the import again even when the collection is complete (adds nothing new)")
        parser.add_argument("--allow-production", action="store_true",
                            help="run even in the production profile (creates a superuser with a printed password)")

    def handle(self, *args, base_url, no_wait, timeout, reimport, allow_production, **options):
        if settings.PRODUCTION and not allow_production:
            raise CommandError(
                "The demo creates accounts (a superuser among them) whose passwords it prints; it refuses "
                "to run in the production profile. Pass --allow-production if you really mean it."
            )
        mode = "Celery eager mode (in this process)" if demo.eager() else "Celery workers"
        db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
        self.stdout.write(f"Loading the CaptionLab demo ({db}, {mode})...")
        try:
            result = demo.load(wait=not no_wait, timeout=timeout, reimport=reimport, out=self.stdout)
        except (RuntimeError, TimeoutError) as exc:
            raise CommandError(str(exc)) from exc

        collection, job = result.collection, result.job
        if result.missing_files:
            self.stdout.write(self.style.WARNING(
                f"Not in this scikit-image: {', '.join(result.missing_files)} (skipped)"))
        images = collection.images.count()
        captions = Caption.objects.filter(image__collection=collection).count()
        if result.import_skipped:
            self.stdout.write(f"Collection {collection.name!r} is already complete: {images} images, "
                              f"{captions} captions (nothing imported again).")
        elif job is not None and job.finished:
            style = self.style.SUCCESS if job.status == job.Status.DONE else self.style.ERROR
            self.stdout.write(style(
                f"Import #{job.pk} {job.get_status_display().lower()}: {job.rows_imported} images imported, "
                f"{job.rows_duplicate} already there, {job.rows_skipped} skipped; "
                f"{job.captions_created} new captions."))
            for issue in job.issues.all()[:20]:
                self.stdout.write(f"  line {issue.line}: {issue.item}: {issue.code}: {issue.message}")
            if job.error:
                self.stdout.write(self.style.ERROR(f"  {job.error}"))
            self.stdout.write(f"Collection {collection.name!r}: {images} images, {captions} captions.")
        elif job is not None and demo.eager():
            self.stdout.write(f"Import #{job.pk} runs when the surrounding transaction commits.")
        elif job is not None:
            self.stdout.write(f"Import #{job.pk} is queued for the workers ({job.get_status_display().lower()}).")

        base = base_url.rstrip("/")
        width = max(len(u.username) for u in result.users)
        self.stdout.write("")
        self.stdout.write(self.style.MIGRATE_HEADING("Demo users (new passwords on every run of `manage.py demo`):"))
        self.stdout.write(f"  {'role':<10} {'username':<{width}}  password")
        for user in result.users:
            self.stdout.write(f"  {user.role:<10} {user.username:<{width}}  {user.password}")
        self.stdout.write(f"Log in at {base}{reverse('login')}")
        if collection is not None:
            try:
                self.stdout.write(f"Demo collection: {base}{collection.get_absolute_url()}")
            except Exception:  # noqa: BLE001 - the collection page may not be routed yet
                pass
        if job is not None and job.finished and job.status != job.Status.DONE:
            raise CommandError(f"the demo import #{job.pk} failed: {job.error or 'see its report'}")
