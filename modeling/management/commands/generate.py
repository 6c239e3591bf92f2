"""Generate captions with captioner versions (optionally reranked by fluency) and, with --evaluate, make a
human-evaluation campaign over them: here with progress lines, or queued on the gpu queue.

    manage.py generate --runs 4 --rerank-by-fluency --split test --limit 20
    manage.py generate --runs 4 5 --evaluate relevance_fluency --name "lstm vs transformer"
    manage.py generate --runs 4 5 --evaluate quality --name "good or bad" --queue
    manage.py generate --job 12          # run (or resume) a queued or interrupted job here
"""
from django.core.management.base import BaseCommand, CommandError

from modeling import generation_job
from modeling.generate import EVALUATION_KINDS
from modeling.models import GenerationJob


class Command(BaseCommand):
    help = ("Generate captions with the model versions of finished captioner runs (stored as captions of "
            "origin 'model'), optionally reranked by the active fluency classifier, and optionally make a "
            "human-evaluation campaign over them. Runs here with progress lines unless --queue.")

    def add_arguments(self, parser):
        parser.add_argument("--runs", type=int, nargs="+", metavar="RUN",
                            help="ids of finished captioner training runs whose versions caption the images")
        parser.add_argument("--evaluate", choices=EVALUATION_KINDS, metavar="KIND",
                            help="make a campaign over the captions: " + ", ".join(EVALUATION_KINDS)
                            + " (relevance_fluency needs two runs or more); without it, captions only")
        parser.add_argument("--name", default="", help="name of the campaign (required with --evaluate)")
        parser.add_argument("--rerank-by-fluency", action="store_true",
                            help="store the beam candidate the active fluency classifier finds most fluent "
                                 "instead of the best-scoring beam; refused when no fluency version is active")
        parser.add_argument("--beam-size", type=int, metavar="K",
                            help="beam width (default: the run's beam_size)")
        parser.add_argument("--split", choices=["train", "val", "test"],
                            help="release split to caption, without --evaluate (default: the version's "
                                 "evaluation split)")
        parser.add_argument("--limit", type=int, metavar="N",
                            help="caption at most N images per version, without --evaluate")
        parser.add_argument("--queue", action="store_true",
                            help="send the job to the gpu queue instead of running it here")
        parser.add_argument("--job", type=int, metavar="JOB",
                            help="run an existing generation job here (queued, or interrupted by a lost worker)")

    def handle(self, *args, **opts):
        job = self._existing(opts["job"]) if opts["job"] else self._create(opts)
        if opts["queue"]:
            generation_job.job_enqueue(job)
            self.stdout.write(f"Queued generation job #{job.pk} on the gpu queue.")
            return
        job = generation_job.job_run(job.pk, echo=lambda line: self.stdout.write(line))
        if job.status != GenerationJob.Status.DONE:
            raise CommandError(f"Generation job #{job.pk} {job.status}: {job.error or 'another worker holds it'}")
        what = f"campaign {job.campaign} (#{job.campaign_id})" if job.campaign_id else f"{job.done} caption(s)"
        self.stdout.write(self.style.SUCCESS(f"Generation job #{job.pk} done: {what}."))

    def _existing(self, pk):
        job = GenerationJob.objects.filter(pk=pk).first()
        if job is None:
            raise CommandError(f"No generation job #{pk}.")
        if job.status == GenerationJob.Status.DONE:
            raise CommandError(f"Generation job #{pk} is already done.")
        return job

    def _create(self, opts):
        if not opts["runs"]:
            raise CommandError("Name the captioner runs (--runs) or an existing --job.")
        if opts["evaluate"] and (opts["split"] or opts["limit"]):
            raise CommandError("An evaluation covers each version's whole evaluation split: drop --split/--limit.")
        try:
            return generation_job.job_create(runs=opts["runs"], eval_kind=opts["evaluate"] or "", name=opts["name"],
                                             rerank=opts["rerank_by_fluency"], beam_size=opts["beam_size"],
                                             split=opts["split"], limit=opts["limit"])
        except generation_job.GenerationError as exc:
            raise CommandError(str(exc)) from None
