"""Embed a collection's images and captions with a registered model, then build its FAISS indexes.

    manage.py embed COLLECTION_ID [--model NAME]           # here, with progress lines
    manage.py embed COLLECTION_ID [--model NAME] --queue   # on the gpu queue's workers
    manage.py embed --job JOB_ID                           # run (or resume) a job
"""
from django.core.management.base import BaseCommand, CommandError

import pack
from curation.models import Collection
from pack.embeddings import jobs
from pack.models import EmbeddingJob


class Command(BaseCommand):
    help = "Embed a collection with a model-pack model (stored per item; skips what is stored)."

    def add_arguments(self, parser):
        parser.add_argument("collection", nargs="?", type=int)
        parser.add_argument("--model", default="", help="a registered model's name (default: the image-text model)")
        parser.add_argument("--queue", action="store_true", help="send the job to the gpu queue instead")
        parser.add_argument("--job", type=int, help="run or resume this embedding job")

    def handle(self, *args, **opts):
        if opts["job"]:
            job = EmbeddingJob.objects.filter(pk=opts["job"]).first()
            if job is None:
                raise CommandError(f"No embedding job #{opts['job']}.")
        else:
            collection = Collection.objects.filter(pk=opts["collection"]).first() if opts["collection"] else None
            if collection is None:
                raise CommandError("Give a collection id (see the collections page), or --job ID.")
            try:
                job = jobs.job_create(collection=collection, model=opts["model"] or None)
            except pack.PackError as exc:
                raise CommandError(exc.message) from None
            if opts["queue"]:
                jobs.job_enqueue(job)
                self.stdout.write(f"Embedding job #{job.pk} queued (gpu queue).")
                return
        self.stdout.write(f"Embedding job #{job.pk}: {job.collection.name} with {job.model.key}")
        job = jobs.job_run(job.pk, echo=self.stdout.write)
        if job.status != EmbeddingJob.Status.DONE:
            raise CommandError(f"Embedding job #{job.pk} {job.status}: {job.error or 'held by another worker'}")
