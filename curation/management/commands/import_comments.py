from curation.ingest.cli import ImportCommand
from curation.models import ImportJob


class Command(ImportCommand):
    help = ("Import a comment dump (image id<TAB>comment per line, AVA style). An id the collection does not have "
            "gets a placeholder image (--unknown-images placeholder, the default) or is skipped (skip); either way "
            "the report lists it with its line.")
    kind = ImportJob.Kind.COMMENTS
    path_help = "the comment dump"

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--unknown-images", choices=["placeholder", "skip"], default="placeholder",
                            help="what a comment on an unknown image id does (default: placeholder)")

    def options_for(self, options) -> dict:
        return {**super().options_for(options), "unknown_images": options["unknown_images"]}
