"""List registered model versions, or activate one.

    manage.py models                   # all versions
    manage.py models --kind fluency
    manage.py models activate fluency 3
    manage.py models activate fluency 3 --force   # even though the activation rule flags it
    manage.py models activate captioner 2 --force # even though it does not beat caption retrieval

A classifier's line shows its verdict against the baselines on the same items; a captioner's its CIDEr (with
its bootstrap interval) beside the trivial captioners' on the same test split, CLIP-S beside the human
references' CLIP-S, "does not beat retrieval" and "not usable" where they apply.

The model pack (pretrained models from local files, the pack app):

    manage.py models pretrained                   # registered pretrained models
    manage.py models add-pretrained DIR --name clip-b32 --licence MIT [--source "openai/clip-vit-base-patch32"]
    manage.py models verify clip-b32              # every file against its registered sha256
"""
from django.core.management.base import BaseCommand, CommandError

from modeling import captioner_report, registry, verdicts
from modeling.models import Kind, ModelVersion
from modeling.trainers.base import TrainingError
from pack.management import pretrained


class Command(BaseCommand):
    help = "List model versions per kind, or activate one (one active version per kind)."

    def add_arguments(self, parser):
        parser.add_argument("action", nargs="?", default="list",
                            choices=["list", "activate", "pretrained", "add-pretrained", "verify"],
                            help="list the versions (default), activate one, or manage the model pack")
        parser.add_argument("kind", nargs="?",
                            help="the model kind (with activate, or a filter of list); with add-pretrained the "
                                 "directory; with verify the pretrained model's name")
        parser.add_argument("version", nargs="?", type=int, help="with activate: the version number to activate")
        parser.add_argument("--name", help="add-pretrained: the name to register the directory under")
        parser.add_argument("--licence", "--license", dest="licence", help="add-pretrained: the model's licence")
        parser.add_argument("--source", default="", help="add-pretrained: where the files came from")
        parser.add_argument("--kind", dest="kind_filter", choices=Kind.values, help="list only this kind")
        parser.add_argument("--force", action="store_true",
                            help="with activate: activate even a version the activation rule flags, a "
                                 "captioner that does not beat retrieval, or one marked not usable")

    def handle(self, *args, **opts):
        if opts["action"] in pretrained.ACTIONS:
            pretrained.handle(self, opts)
            return
        if opts["kind"] and opts["kind"] not in Kind.values:
            raise CommandError(f"Unknown kind {opts['kind']!r}; known: {', '.join(Kind.values)}.")
        if opts["action"] == "activate":
            self._activate(opts)
            return
        versions = ModelVersion.objects.select_related("run").order_by("kind", "-version")
        kind = opts["kind_filter"] or opts["kind"]
        if kind:
            versions = versions.filter(kind=kind)
        if not versions:
            self.stdout.write("No model versions.")
        else:
            self.stdout.write(f"Activation rule: {verdicts.RULE}")
        for v in versions:
            self.stdout.write(self._line(v))

    def _activate(self, opts):
        if not opts["kind"] or opts["version"] is None:
            raise CommandError("Usage: manage.py models activate KIND VERSION [--force]")
        version = ModelVersion.objects.filter(kind=opts["kind"], version=opts["version"]).first()
        if version is None:
            raise CommandError(f"No {opts['kind']} version {opts['version']}.")
        try:
            registry.activate(version, force=opts["force"])
        except TrainingError as exc:
            hint = " Add --force to activate it anyway." if exc.code != "mismatched_checkpoint" else ""
            raise CommandError(f"{exc}{hint}") from None
        self.stdout.write(self.style.SUCCESS(f"{version} is now active."))

    def _line(self, v) -> str:
        headline = ", ".join(f"{k}={val:.3f}" if isinstance(val, float) else f"{k}={val}"
                             for k, val in (v.metrics or {}).items()
                             if isinstance(val, (int, float)) and not isinstance(val, bool))[:160]
        line = (f"{'*' if v.active else ' '} {v.kind:<10} v{v.version:<3} run #{v.run_id or '-':<5} "
                f"{v.config.get('trainer', '?'):<24} ")
        warning = ""
        if v.kind == Kind.CAPTIONER:
            headline = captioner_report.cli_summary(v.metrics) or headline
            if captioner_report.does_not_beat_retrieval(v.metrics):
                warning += f"  [{captioner_report.BELOW_RETRIEVAL}]"
        if not v.usable:
            warning += f"  [not usable: {v.usable_note or 'trained on too little to learn'}]"
        line = f"{line}{headline}{warning}"
        shown = verdicts.display(v.metrics)
        if shown is None:
            return line
        state = "activatable" if shown["activatable"] else "FLAGGED"
        return f"{line}  [{state}: {shown['headline']}]\n      verdict: {shown['text']}"
