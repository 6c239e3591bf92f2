from curation.ingest.cli import ImportCommand
from curation.models import ImportJob


class Command(ImportCommand):
    help = "Import a folder or .zip of images, with an optional sidecar CSV (file,caption[,license,credit,source_url,external_id])."
    kind = ImportJob.Kind.IMAGES
    path_help = "a folder of images or a .zip file"

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--sidecar", default="captions.csv", help="name of the sidecar CSV inside the folder or zip")

    def options_for(self, options):
        return {**super().options_for(options), "sidecar": options["sidecar"]}
