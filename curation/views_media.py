"""Serving image files: only to users who can see the image, only verified image types inline.

Curators and admins see every image. Anyone else with a role sees an image only when a media-access
policy registered in ``curation.extensions`` says yes: annotation's (``annotation.media_access``) lets an
annotator see an item of a campaign they may work in. Everyone else gets a 403, so image ids cannot be
walked to read a collection that was never put in front of the annotator.

Files never come from a plain static URL. An image whose format was verified at ingest is sent
with its own content type and ``X-Content-Type-Options: nosniff``; anything else is sent as an
attachment of type application/octet-stream, so a crafted upload cannot run as HTML or SVG.
"""
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404

from captionlab.roles import CURATOR, has_role, user_roles

from . import extensions
from .models import Image

INLINE_TYPES = {"image/jpeg", "image/png", "image/webp", "image/gif"}


def serve(field_file, content_type: str, filename: str):
    if not field_file:
        raise Http404("This image has no file yet.")
    storage = field_file.storage
    inline = content_type in INLINE_TYPES
    try:
        storage.path(field_file.name)
    except NotImplementedError:
        # Remote storage (S3): a short-lived signed URL that forces the same headers.
        disposition = "inline" if inline else f'attachment; filename="{filename}"'
        url = storage.url(field_file.name, parameters={
            "ResponseContentType": content_type if inline else "application/octet-stream",
            "ResponseContentDisposition": disposition,
        })
        return HttpResponseRedirect(url)
    response = FileResponse(
        field_file.open("rb"),
        content_type=content_type if inline else "application/octet-stream",
        as_attachment=not inline,
        filename=filename,
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Cache-Control"] = "private, max-age=3600"
    return response


def _image_for(request, pk: int) -> Image:
    if not user_roles(request.user):
        raise PermissionDenied("Images are shown to annotators, curators and admins only.")
    if not has_role(request.user, CURATOR) and not extensions.media_allowed(request.user, pk):
        raise PermissionDenied("This image is not part of any campaign you work in.")
    return get_object_or_404(Image, pk=pk)


@login_required
def image_file(request, pk: int):
    image = _image_for(request, pk)
    return serve(image.file, image.content_type, f"{image.pk}.{image.extension}")


@login_required
def image_thumbnail(request, pk: int):
    image = _image_for(request, pk)
    return serve(image.thumbnail, "image/jpeg", f"{image.pk}-thumb.jpg")
