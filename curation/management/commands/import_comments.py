from curation.ingest.cli import ImportCommand
from curation.models import ImportJob


class Command(ImportCommand):
    help = "Import a comment dump (image id<TAB>comment per line, AVA style); unknown ids get placeholder images."
    kind = ImportJob.Kind.COMMENTS
    path_help = "the comment dump"
