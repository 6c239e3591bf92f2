"""Search a collection by meaning from the command line, as the search page and the API do.

    manage.py search COLLECTION_ID "a dog on a beach"            # captions by words and meaning
    manage.py search COLLECTION_ID "a dog on a beach" --images   # images for the text (CLIP text tower)
    manage.py search COLLECTION_ID --like-caption 123            # captions like caption 123
    manage.py search COLLECTION_ID --like-image 45 --k 10        # images like image 45
    manage.py search COLLECTION_ID '"red car" -truck' --words --page 2   # captions by words alone, no model
"""
from django.core.management.base import BaseCommand, CommandError

from curation.models import Caption, Collection, Image
from curation.word_search import PER_PAGE, WordSearchError, search_words
from pack import PackError
from pack.embeddings import search


class Command(BaseCommand):
    help = "Search a collection's captions or images by meaning (needs its embeddings: manage.py embed)."

    def add_arguments(self, parser):
        parser.add_argument("collection", type=int)
        parser.add_argument("query", nargs="?", default="")
        parser.add_argument("--images", action="store_true", help="find images for the text instead of captions")
        parser.add_argument("--k", type=int, default=20, help="how many results (1-200)")
        parser.add_argument("--model", default="", help="a registered model's name (default: the kind's default)")
        parser.add_argument("--like-caption", type=int, metavar="ID", help="captions like this caption")
        parser.add_argument("--like-image", type=int, metavar="ID", help="images like this image")
        parser.add_argument("--words", action="store_true",
                            help="captions by their words alone (full text, paginated; needs no model)")
        parser.add_argument("--page", type=int, default=1, help="--words: the page (from 1)")
        parser.add_argument("--per-page", type=int, default=PER_PAGE, help="--words: results per page (1-100)")

    def handle(self, *args, **opts):
        collection = Collection.objects.filter(pk=opts["collection"]).first()
        if collection is None:
            raise CommandError(f"No collection #{opts['collection']}.")
        if opts["words"]:
            return self._words(collection, opts)
        model = opts["model"] or None
        try:
            if opts["like_caption"]:
                caption = Caption.objects.filter(pk=opts["like_caption"], image__collection=collection).first()
                if caption is None:
                    raise CommandError(f"Collection #{collection.pk} has no caption #{opts['like_caption']}.")
                found = search.captions_like(caption, opts["k"], model=model)
            elif opts["like_image"]:
                image = Image.objects.filter(pk=opts["like_image"], collection=collection).first()
                if image is None:
                    raise CommandError(f"Collection #{collection.pk} has no image #{opts['like_image']}.")
                found = search.images_like(image, opts["k"], model=model)
            else:
                found = search.collection_search(collection, opts["query"], mode="images" if opts["images"] else
                                                 "captions", k=opts["k"], model=model)
        except PackError as exc:
            raise CommandError(exc.message) from None
        for note in found.notes:
            self.stderr.write(note)
        for rank, hit in enumerate(found.rows, 1):
            why = ", ".join(hit.why)
            label = f"caption {hit.id} (image {hit.image_id})" if hit.kind == "caption" else f"image {hit.id}"
            self.stdout.write(f"{rank:>3}. {hit.score:.4f}  {label}  [{why}]  {hit.text[:120]}")
        if not found.rows:
            self.stdout.write("Nothing found.")

    def _words(self, collection, opts):
        try:
            found = search_words(collection, opts["query"], page=opts["page"], per_page=opts["per_page"])
        except WordSearchError as exc:
            raise CommandError(exc.message) from None
        for note in found.notes:
            self.stderr.write(note)
        page = found.page
        self.stdout.write(f"{found.total} caption(s) match; page {page.number} of {page.paginator.num_pages}.")
        for rank, hit in enumerate(found.rows, page.start_index()):
            text = "".join(f"[{piece}]" if match else piece for piece, match in hit.pieces)
            self.stdout.write(f"{rank:>4}. caption {hit.id} (image {hit.image_id}, {hit.origin})  {text[:200]}")
