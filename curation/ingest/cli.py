"""Shared plumbing of the import_* management commands: create the job, run or wait, print."""
import sys
import time

from django.core.management.base import BaseCommand, CommandError

from ..errors import IngestError
from ..models import Caption, Collection, ImportJob
from ..services import collection_create, import_create


class ImportCommand(BaseCommand):
    kind: str = ""
    path_help = "file to import"

    def add_arguments(self, parser):
        parser.add_argument("path", help=self.path_help)
        parser.add_argument("--collection", required=True, help="collection name (created if it does not exist)")
        parser.add_argument("--origin", choices=Caption.Origin.values, help="origin recorded on the captions")
        parser.add_argument("--language", help="language code of the captions (default: the collection's)")
        parser.add_argument("--source-name", help="import source recorded on captions (default: the file name)")
        parser.add_argument("--no-wait", action="store_true", help="queue the import and return at once")

    def options_for(self, options) -> dict:
        return {k: options[k] for k in ("origin", "language") if options.get(k)}

    def handle(self, *args, **options):
        collection = Collection.objects.filter(name=options["collection"]).first()
        try:
            if collection is None:
                collection = collection_create(name=options["collection"])
                self.stdout.write(f"Created collection {collection.name!r}.")
            job = import_create(
                collection=collection, kind=self.kind, source_path=options["path"],
                source_name=options.get("source_name"), options=self.options_for(options),
            )
        except IngestError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"Import #{job.pk} queued ({job.get_kind_display()}).")
        if options["no_wait"]:
            return
        job = self.wait(job)
        self.print_report(job)
        if job.status == ImportJob.Status.FAILED:
            raise CommandError(f"import #{job.pk} failed: {job.error}")

    def wait(self, job: ImportJob) -> ImportJob:
        """Poll the job (it runs in a worker, or already ran inline in eager mode) with a progress line."""
        interactive = sys.stdout.isatty()
        last = None
        while True:
            job.refresh_from_db()
            line = f"{job.get_status_display():<20} {job.percent:3d}%  rows {job.rows_read}/{job.rows_total or '?'}"
            if job.downloads_total:
                line += f"  downloads {job.downloads_done + job.downloads_failed}/{job.downloads_total}"
            if line != last:
                self.stdout.write(("\r" + line) if interactive else line, ending="" if interactive else "\n")
                last = line
            if job.finished:
                if interactive:
                    self.stdout.write("")
                return job
            time.sleep(0.5)

    def print_report(self, job: ImportJob):
        self.stdout.write(
            f"Rows read {job.rows_read}, imported {job.rows_imported}, skipped {job.rows_skipped}, "
            f"already present {job.rows_duplicate}; images created {job.images_created}, "
            f"captions created {job.captions_created}"
            + (f"; downloads {job.downloads_done} ok, {job.downloads_failed} failed" if job.downloads_total else "")
        )
        issues = job.issues.all()
        count = issues.count()
        for issue in issues[:50]:
            where = f"line {issue.line}" if issue.line else "-"
            self.stdout.write(f"  {where:>10}  {issue.code:<20} {issue.item[:40]:<40} {issue.message}")
        if count > 50:
            self.stdout.write(f"  ... and {count - 50} more (see the import page or /api/imports/{job.pk}/report/)")
