"""List registered model versions, or activate one.

    manage.py models                   # all versions
    manage.py models --kind fluency
    manage.py models activate fluency 3
"""
from django.core.management.base import BaseCommand, CommandError

from modeling import registry
from modeling.models import Kind, ModelVersion


class Command(BaseCommand):
    help = "List model versions per kind, or activate one (one active version per kind)."

    def add_arguments(self, parser):
        parser.add_argument("action", nargs="?", choices=["list", "activate"], default="list")
        parser.add_argument("kind", nargs="?", choices=Kind.values)
        parser.add_argument("version", nargs="?", type=int)
        parser.add_argument("--kind", dest="kind_filter", choices=Kind.values)

    def handle(self, *args, **opts):
        if opts["action"] == "activate":
            if not opts["kind"] or opts["version"] is None:
                raise CommandError("Usage: manage.py models activate KIND VERSION")
            version = ModelVersion.objects.filter(kind=opts["kind"], version=opts["version"]).first()
            if version is None:
                raise CommandError(f"No {opts['kind']} version {opts['version']}.")
            registry.activate(version)
            self.stdout.write(self.style.SUCCESS(f"{version} is now active."))
            return
        versions = ModelVersion.objects.select_related("run").order_by("kind", "-version")
        kind = opts["kind_filter"] or opts["kind"]
        if kind:
            versions = versions.filter(kind=kind)
        if not versions:
            self.stdout.write("No model versions.")
        for v in versions:
            headline = ", ".join(f"{k}={val:.3f}" for k, val in (v.metrics or {}).items()
                                 if isinstance(val, (int, float)) and not isinstance(val, bool))[:160]
            self.stdout.write(f"{'*' if v.active else ' '} {v.kind:<10} v{v.version:<3} run #{v.run_id or '-':<5} "
                              f"{v.config.get('trainer', '?'):<24} {headline}")
