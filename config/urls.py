from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from captionlab import jobs

from .views import home

urlpatterns = [
    path("", home, name="home"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", include("curation.api_urls")),
    path("api/", include("annotation.api_urls")),
    path("api/", include("releases.api_urls")),
    path("api/", include("modeling.api")),
    path("api/", include("modeling.api_loop")),
    path("api/", include("pack.api")),
    path("jobs/<str:kind>/<int:pk>/retry", jobs.job_retry, name="job-retry"),
    path("api/jobs/<str:kind>/<int:pk>/", jobs.JobHealthView.as_view(), name="api-job-health"),
    path("api/jobs/<str:kind>/<int:pk>/retry/", jobs.JobRetryView.as_view(), name="api-job-retry"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Anonymous visitors of the docs are sent to the login page (the API itself answers 401/403 as JSON).
    path("api/docs/", login_required(SpectacularSwaggerView.as_view(url_name="api-schema")), name="api-docs"),
    path("api/redoc/", login_required(SpectacularRedocView.as_view(url_name="api-schema")), name="api-redoc"),
    path("", include("annotation.urls")),
    path("", include("curation.urls")),
    path("", include("pack.urls")),
    path("", include("releases.urls")),
    path("", include("modeling.urls")),
]


def _not_found(request, exception=None):
    """JSON for API paths (a client parses the body), the HTML page for the rest."""
    from django.http import JsonResponse
    from django.views.defaults import page_not_found

    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found.", "code": "not_found"}, status=404)
    return page_not_found(request, exception)


def _bad_request(request, exception=None):
    """A request Django refuses before any view (too many fields, a bad host): JSON on API paths."""
    from django.http import JsonResponse
    from django.views.defaults import bad_request

    if request.path.startswith("/api/"):
        return JsonResponse({"detail": f"Bad request: {exception or 'refused'}", "code": "bad_request"}, status=400)
    return bad_request(request, exception)


handler404 = _not_found
handler400 = _bad_request
