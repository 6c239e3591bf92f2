"""Login lockout (django-axes): the backend that checks it and the response a locked-out caller gets."""
from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.http import JsonResponse
from django.shortcuts import render

MESSAGE = ("Too many failed logins for this account from your address. Try again in {minutes} minutes, "
           "or ask an admin to unlock it.")


class LockoutBackend(AxesStandaloneBackend):
    """Axes' check, run before the password one.

    A call without a request (the test client's ``login()``, a shell) has no address to count
    against: it passes on to ModelBackend instead of failing as axes' own backend does. Every
    network path (the login form, the admin, the token endpoint) passes its request.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def lockout_response(request, original_response=None, credentials=None):
    """429 with a message: JSON for the API, the login page's layout for people."""
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    message = MESSAGE.format(minutes=minutes)
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": message}, status=429)
    return render(request, "registration/locked_out.html", {"message": message}, status=429)
