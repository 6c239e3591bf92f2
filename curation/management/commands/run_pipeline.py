import sys
import time

from django.core.management.base import BaseCommand, CommandError

from curation.errors import IngestError
from curation.models import Collection, FilterRun, Pipeline
from curation.pipeline import executor
from curation.pipeline.presets import PRESETS, ensure_presets
from curation.services import run_create


class Command(BaseCommand):
    help = "Run a filter pipeline (a saved one, or a seed preset) over a collection, with a progress line and the funnel."

    def add_arguments(self, parser):
        parser.add_argument("--collection", required=True, help="collection name")
        parser.add_argument("--pipeline", required=True, help=f"pipeline name; presets: {', '.join(PRESETS)}")
        parser.add_argument("--no-wait", action="store_true", help="queue the run and return at once")

    def handle(self, *args, **options):
        collection = Collection.objects.filter(name=options["collection"]).first()
        if collection is None:
            raise CommandError(f"no collection named {options['collection']!r}")
        if options["pipeline"] in PRESETS:
            ensure_presets()
        pipeline = Pipeline.objects.filter(name=options["pipeline"]).first()
        if pipeline is None:
            raise CommandError(f"no pipeline named {options['pipeline']!r}")
        try:
            run = run_create(collection=collection, pipeline=pipeline)
        except IngestError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"Run #{run.pk}: {pipeline.name} over {collection.name} ({len(run.snapshot)} steps)")
        if options["no_wait"]:
            return
        tty = sys.stdout.isatty()
        last = None
        while True:
            run.refresh_from_db()
            p = executor.progress(run)
            eta = f"ETA {p['eta_seconds']}s" if p["eta_seconds"] is not None else "ETA -"
            percent = " run-level" if p["run_level"] else f"{p['percent']:3d}%"  # not 99% while they run
            line = (f"{run.get_status_display():<26} {percent}  chunks {p['chunks_done']}/{p['chunks_total']}"
                    f" (failed {p['chunks_failed']})  items {p['items_done']}/{p['items_total']}"
                    f"  {p['items_per_second']:.0f} items/s  {eta}")
            if line != last:
                self.stdout.write(("\r" + line) if tty else line, ending="" if tty else "\n")
                last = line
            if run.finished:
                break
            time.sleep(0.5)
        if tty:
            self.stdout.write("")
        self.stdout.write(f"{'step':<4} {'filter':<24} {'entered':>8} {'kept':>8} {'dropped':>8} {'n/a':>6}")
        funnel = executor.with_warnings(run.funnel)
        for row in funnel:
            flag = "  !" if row["warning"] else ""
            self.stdout.write(f"{row['step'] + 1:<4} {row['filter']:<24} {row['entered']:>8} {row['kept']:>8} "
                              f"{row['dropped']:>8} {row['not_applicable']:>6}{flag}")
        for row in funnel:
            if row["warning"]:
                self.stdout.write(self.style.WARNING(f"Warning: step {row['step'] + 1} ({row['filter']}) {row['warning']}"))
        if run.status == FilterRun.Status.FAILED or run.error:
            self.stdout.write(self.style.WARNING(run.error))
