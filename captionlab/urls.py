from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from captionlab import jobs

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", include("curation.api_urls")),
    path("api/", include("annotation.api_urls")),
    path("api/", include("modeling.api")),
    path("api/", include("modeling.api_loop")),
    path("api/", include("modeling.api_pack")),
    path("jobs/<str:kind>/<int:pk>/retry", jobs.job_retry, name="job-retry"),
    path("api/jobs/<str:kind>/<int:pk>/", jobs.JobHealthView.as_view(), name="api-job-health"),
    path("api/jobs/<str:kind>/<int:pk>/retry/", jobs.JobRetryView.as_view(), name="api-job-retry"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Anonymous visitors of the docs are sent to the login page (the API itself answers 401/403 as JSON).
    path("api/docs/", login_required(SpectacularSwaggerView.as_view(url_name="api-schema")), name="api-docs"),
    path("api/redoc/", login_required(SpectacularRedocView.as_view(url_name="api-schema")), name="api-redoc"),
    path("", include("annotation.urls")),
    path("", include("curation.urls")),
    path("", include("modeling.urls")),
]
