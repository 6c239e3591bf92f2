"""Request guards that apply to every page and API endpoint."""
import re

from django.http import HttpResponseBadRequest, JsonResponse
from django.template.loader import render_to_string

# C0 controls and DEL. Tab, LF and CR stay allowed: a textarea posts them, and a query string
# carrying one is harmless. NUL is the one PostgreSQL refuses outright (a 500 before this guard);
# the others are refused too because no field of the platform means them and they hide text.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
MESSAGE = "The request contains a NUL or another control character in '{name}'; remove it and try again."


def _first_bad_field(querydict) -> str | None:
    for key, values in querydict.lists():
        if _CONTROL.search(key) or any(_CONTROL.search(value) for value in values):
            return _CONTROL.sub("?", key)
    return None


class ControlCharacterMiddleware:
    """Answers 400 with a message when a query parameter or a form field holds a control character.

    Only url-encoded form bodies are read: a multipart body may be a 2 GB import, and its text
    fields reach the database through forms and serializers that refuse NUL themselves.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        bad = _first_bad_field(request.GET)
        if bad is None and request.content_type == "application/x-www-form-urlencoded":
            bad = _first_bad_field(request.POST)
        if bad is None:
            return self.get_response(request)
        message = MESSAGE.format(name=bad)
        if request.path.startswith("/api/"):
            return JsonResponse({"detail": message}, status=400)
        return HttpResponseBadRequest(render_to_string("400.html", {"message": message}, request=request))


class FramedSessionCookieMiddleware:
    """Cookies set by a page that MTurk frames get ``SameSite=None; Secure``.

    Inside the HIT's frame the platform is a third party: a browser sends a ``SameSite=Lax`` cookie
    with a top-level navigation only, so the framed work pages would lose the session the MTurk
    entry page started and show an empty frame. Only responses marked framable
    (``annotation.web.crowd.mturk.framable``: the MTurk pages and an MTurk worker's work pages) get the
    relaxed attribute; every other page keeps the site-wide SameSite=Lax. Listed before
    SessionMiddleware so that it sees the cookies the session and CSRF middleware set.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if getattr(response, "xframe_options_exempt", False):
            from django.conf import settings

            for name in (settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME):
                morsel = response.cookies.get(name)
                if morsel is not None and morsel.value:
                    morsel["samesite"] = "None"
                    morsel["secure"] = True
        return response
