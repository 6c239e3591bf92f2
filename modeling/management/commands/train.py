"""Create a training run and run it here (terminal progress), or queue it on the gpu queue.

    manage.py train --campaign 3                 # a fluency campaign: the default trainer, fluency-finetune
    manage.py train fluency-lstm4 --campaign 3 --epochs 5 --seed 1   # the seed's four-way LSTM
    manage.py train captioner-lstm --release 2 --strategy weighted_loss --device cuda --queue
    manage.py train --resume 12          # continue a failed/killed run from its last checkpoint
    manage.py train fluency-lstm4 --campaign 3 --device cpu --nproc 2   # DDP: two processes (gloo)
    manage.py train captioner-lstm --release 2 --seed 1 --repeats 3   # seeds 1, 2, 3 in one group: mean ± sd
"""
import json

from django.core.management.base import BaseCommand, CommandError

from modeling import engine, groups
from modeling.models import TrainingRun
from modeling.trainers import all_trainers
from modeling.trainers.base import TrainingError


class Command(BaseCommand):
    help = "Train a model (fluency classifier, captioner, topic CNN) from a campaign or a release."

    def add_arguments(self, parser):
        parser.add_argument("trainer", nargs="?", help="trainer name; --list shows them. With --campaign and no "
                                                        "trainer: fluency-finetune (the packaged sentence encoder "
                                                        "fine-tuned on the labels); fluency-encoder (a head on the "
                                                        "frozen encoder) fits in seconds; fluency-lstm4 is the "
                                                        "seed's model")
        parser.add_argument("--list", action="store_true", help="list the trainers and their defaults")
        parser.add_argument("--campaign", type=int, help="id of the campaign whose aggregated votes train the "
                                                            "model (fluency classifiers)")
        parser.add_argument("--release", type=int, help="id of the frozen release that trains the model "
                                                           "(captioners, topic CNN)")
        parser.add_argument("--name", default="", help="a name for the run, shown on the runs page")
        parser.add_argument("--epochs", type=int, help="epochs to train (the most, with early stopping)")
        parser.add_argument("--batch-size", type=int, help="items per batch; halved on out of memory")
        parser.add_argument("--lr", type=float, help="learning rate")
        parser.add_argument("--seed", type=int, help="seed of the split, the weights and the batch order")
        parser.add_argument("--device", choices=["auto", "cpu", "cuda"],
                            help="where to train; auto: the GPU when this machine has one")
        parser.add_argument("--nproc", type=int, help="train on N processes (DistributedDataParallel through "
                                                      "torchrun: one per GPU, or gloo on the CPU); default: every "
                                                      "GPU when there are several")
        parser.add_argument("--strategy", help="captioners: all, fluency_only, rejection_sampling or "
                                               "weighted_loss")
        parser.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                            help="any other config value, e.g. --set hidden=128 (repeatable)")
        parser.add_argument("--repeats", type=int, default=1, metavar="N",
                            help="N runs with seeds seed, seed+1, ... in one run group (mean ± sd of every "
                                 "metric on its page; groups are compared on the compare page)")
        parser.add_argument("--queue", action="store_true", help="send to the gpu queue instead of running here")
        parser.add_argument("--resume", type=int, metavar="RUN", help="continue an existing run")

    def handle(self, *args, **opts):
        if opts["list"]:
            for name, trainer in all_trainers().items():
                from modeling.trainers import DEFAULT_TRAINERS

                mark = " [default]" if name in DEFAULT_TRAINERS.values() else ""
                self.stdout.write(f"{name} ({trainer.kind}){mark}: {json.dumps(trainer.default_config, default=str)}")
            return
        runs = [self._resume(opts["resume"])] if opts["resume"] else self._create(opts)
        if len(runs) > 1:
            self.stdout.write(f"Run group {runs[0].group}: {len(runs)} runs, seeds "
                              f"{runs[0].config['seed']}–{runs[-1].config['seed']}.")
        if opts["queue"]:
            for run in runs:
                engine.enqueue(run)
                self.stdout.write(f"Queued {run} (#{run.pk}) on the gpu queue.")
            return
        failed = [run for run in (self._train(run) for run in runs) if run.status != TrainingRun.Status.DONE]
        if len(runs) > 1:
            self._summary(runs[0].group)
        if failed:
            raise CommandError("; ".join(f"{run} {run.status}: {run.error}" for run in failed))

    def _resume(self, pk):
        run = TrainingRun.objects.filter(pk=pk).first()
        if run is None:
            raise CommandError(f"No training run #{pk}.")
        if run.status == TrainingRun.Status.DONE:
            raise CommandError(f"{run} is already done.")
        TrainingRun.objects.filter(pk=run.pk).update(status=TrainingRun.Status.RUNNING, error="",
                                                      finished_at=None, attempts=0)
        return run

    def _train(self, run):
        run = engine.train(run.pk, echo=lambda line: self.stdout.write(line))
        if run.status == TrainingRun.Status.DONE:
            version = getattr(run, "model_version", None)
            self.stdout.write(self.style.SUCCESS(f"{run} done on {run.device}; registered {version}. Metrics: "
                                                 f"{json.dumps(run.metrics, default=str)[:2000]}"))
        return run

    def _summary(self, group):
        self.stdout.write(f"Group {group}, mean ± sd over its finished runs:")
        for row in groups.group_summary(groups.group_runs(group)):
            self.stdout.write(f"  {row['key']}: {row['mean']:.4g} ± {row['sd']:.4g} (n={row['n']})")

    def _create(self, opts):
        from annotation.models import Campaign
        from releases.models import Release

        if not opts["trainer"] and opts["campaign"] is not None:
            from modeling.trainers import DEFAULT_TRAINERS

            opts["trainer"] = DEFAULT_TRAINERS["fluency"]
        if not opts["trainer"]:
            raise CommandError("Name a trainer (see --list) or --resume a run.")
        config = {}
        for key, opt in (("epochs", "epochs"), ("batch_size", "batch_size"), ("lr", "lr"), ("seed", "seed"),
                         ("device", "device"), ("strategy", "strategy"), ("ddp_processes", "nproc")):
            if opts[opt] is not None:
                config[key] = opts[opt]
        for item in opts["set"]:
            key, sep, raw = item.partition("=")
            if not sep or not key:
                raise CommandError(f"--set wants KEY=VALUE, got {item!r}.")
            try:
                config[key] = json.loads(raw)
            except ValueError:
                config[key] = raw
        campaign = release = None
        if opts["campaign"] is not None:
            campaign = Campaign.objects.filter(pk=opts["campaign"]).first()
            if campaign is None:
                raise CommandError(f"No campaign #{opts['campaign']}.")
        if opts["release"] is not None:
            release = Release.objects.filter(pk=opts["release"]).first()
            if release is None:
                raise CommandError(f"No release #{opts['release']}.")
            if not release.frozen:
                raise CommandError(f"Release {release} is not frozen.")
        try:
            return groups.create_repeats(opts["trainer"], config, opts["repeats"], campaign=campaign, release=release,
                                         name=opts["name"])
        except (TrainingError, ValueError) as exc:
            raise CommandError(str(exc)) from None
