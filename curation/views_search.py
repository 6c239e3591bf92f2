"""Search pages: a collection's search box (captions by words and meaning, or images for a text), and the
"captions like this" / "images like this" pages that the decisions browser and the image page link to.

Each view parses, checks the role, calls one function of ``pack.embeddings.search`` and renders; a
``PackError`` (no model registered, no embeddings yet) is shown on the page with what to do, never a 500.
"""
from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from captionlab import roles
from captionlab.roles import role_required
from pack import PackError

from .models import Caption, Collection, Image
from .views import render_page
from .word_search import WordSearchError, search_words

DEFAULT_K = 50
LIKE_K = 24
STATUS = {"invalid": 400, "wrong_kind": 400}  # any other PackError is the state of the data: 409


def _status(exc: PackError) -> int:
    return STATUS.get(exc.code, 409)


@role_required(roles.CURATOR)
@require_GET
def collection_search(request, pk):
    """The search box and its results; htmx swaps the results as the curator types."""
    from pack.embeddings import search  # numpy: imported by the first search, not by every web process

    collection = get_object_or_404(Collection, pk=pk)
    query = request.GET.get("q", "").strip()
    mode = request.GET.get("mode", "captions")
    mode = mode if mode in (*search.MODES, "words") else "captions"
    context = {"collection": collection, "q": query, "mode": mode, "results": None, "error": "", "error_code": "",
               "model_name": request.GET.get("model", "")}
    status = 200
    if query and mode == "words":  # by words alone: full text, paginated, needs no model
        try:
            context["words"] = search_words(collection, query, page=request.GET.get("page"),
                                            per_page=request.GET.get("per_page"))
        except WordSearchError as exc:
            context["error"], context["error_code"] = exc.message, exc.code
            status = 200 if request.htmx else 400
    elif query:
        try:
            context["results"] = search.collection_search(collection, query, mode=mode,
                                                          k=request.GET.get("k") or DEFAULT_K,
                                                          model=context["model_name"] or None)
        except PackError as exc:
            context["error"], context["error_code"] = exc.message, exc.code
            status = 200 if request.htmx else _status(exc)  # htmx swaps only 2xx answers
    return render_page(request, "search/search.html", "search/_results.html", context, status=status)


def _like(request, context: dict, find):
    context = {**context, "results": None, "error": "", "error_code": ""}
    status = 200
    try:
        context["results"] = find()
    except PackError as exc:
        context["error"], context["error_code"] = exc.message, exc.code
        status = _status(exc)
    return render_page(request, "search/like.html", "search/_results.html", context, status=status)


@role_required(roles.CURATOR)
@require_GET
def caption_like(request, pk):
    """Captions of the same collection nearest in meaning to this one."""
    from pack.embeddings import search

    caption = get_object_or_404(Caption.objects.select_related("image__collection"), pk=pk)
    model = request.GET.get("model") or None
    return _like(request, {"collection": caption.image.collection, "caption": caption, "mode": "captions"},
                 lambda: search.captions_like(caption, LIKE_K, model=model))


@role_required(roles.CURATOR)
@require_GET
def image_like(request, pk):
    """Images of the same collection that look like this one (CLIP image vectors)."""
    from pack.embeddings import search

    image = get_object_or_404(Image.objects.select_related("collection"), pk=pk)
    model = request.GET.get("model") or None
    return _like(request, {"collection": image.collection, "image": image, "mode": "images"},
                 lambda: search.images_like(image, LIKE_K, model=model))
