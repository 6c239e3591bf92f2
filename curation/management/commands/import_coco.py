from curation.ingest.cli import ImportCommand
from curation.models import ImportJob


class Command(ImportCommand):
    help = "Import a COCO captions JSON (images + annotations); image files from --images-dir, or downloaded from their URLs."
    kind = ImportJob.Kind.COCO
    path_help = "the COCO captions JSON file"

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--images-dir", help="folder holding the images named by file_name")
        parser.add_argument("--no-download", action="store_true", help="do not fetch images by URL")

    def options_for(self, options):
        opts = {**super().options_for(options), "download": not options["no_download"]}
        if options.get("images_dir"):
            opts["images_dir"] = options["images_dir"]
        return opts
