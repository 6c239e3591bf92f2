from curation.ingest.cli import ImportCommand
from curation.models import ImportJob


class Command(ImportCommand):
    help = "Import a Conceptual-Captions-style TSV (caption<TAB>image URL per line); images are downloaded by workers."
    kind = ImportJob.Kind.TSV
    path_help = "the TSV file"

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--no-download", action="store_true", help="record the URLs but do not fetch the images")

    def options_for(self, options):
        return {**super().options_for(options), "download": not options["no_download"]}
