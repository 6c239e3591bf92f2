"""External crowds: the link-out start and consent pages, the external Finish step, and the
curator's provider page of a campaign (see annotation.web.crowd.linkout)."""
from django.urls import path

from . import linkout as views

urlpatterns = [
    path("x/<str:token>/start", views.linkout_start, name="linkout-start"),
    path("x/<str:token>/consent", views.linkout_consent, name="linkout-consent"),
    path("work/<int:campaign_id>/image/<int:image_id>", views.external_image, name="external-image"),
    path("work/<int:campaign_id>/finish", views.external_finish, name="external-finish"),
    path("campaigns/<int:pk>/provider/", views.campaign_provider, name="campaign-provider"),
    path("campaigns/<int:pk>/provider/do/<slug:action>", views.provider_action, name="provider-action"),
    path("campaigns/<int:pk>/provider/assignments/<int:assignment_id>/<slug:op>", views.provider_assignment,
         name="provider-assignment"),
    path("campaigns/<int:pk>/provider/<slug:kind>.csv", views.provider_export, name="provider-export"),
    path("campaigns/<int:pk>/provider/import", views.provider_import, name="provider-import"),
    path("campaigns/<int:pk>/batch-results.csv", views.batch_export, name="batch-export"),
    path("campaigns/<int:pk>/batch-import", views.batch_import, name="batch-import"),
]
