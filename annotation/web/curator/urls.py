"""The curator's campaign pages (every view needs the curator role; admins pass)."""
from django.urls import path

from . import views
from .views import results as results_views

urlpatterns = [
    path("campaigns/", views.campaign_list, name="campaign-list"),
    path("campaigns/new", views.campaign_create, name="campaign-create"),
    path("campaigns/preview", views.instructions_preview, name="campaign-preview"),
    path("campaigns/<int:pk>/", views.campaign_detail, name="campaign-detail"),
    path("campaigns/<int:pk>/progress", views.campaign_progress, name="campaign-progress"),
    path("campaigns/<int:pk>/status", views.campaign_status, name="campaign-status"),
    path("campaigns/<int:pk>/members", views.campaign_members, name="campaign-members"),
    path("campaigns/<int:pk>/gold", views.campaign_gold, name="campaign-gold"),
    path("campaigns/<int:pk>/workers", views.campaign_workers, name="campaign-workers"),
    path("campaigns/<int:pk>/aggregate", views.campaign_aggregate, name="campaign-aggregate"),
    path("campaigns/<int:pk>/apply-verdicts", views.campaign_apply_verdicts, name="campaign-apply-verdicts"),
    path("campaigns/<int:pk>/pairs-fit", views.campaign_pairs_fit, name="campaign-pairs-fit"),
    path("campaigns/<int:pk>/tasks", views.campaign_tasks, name="campaign-tasks"),
    path("campaigns/<int:pk>/export.csv", views.campaign_export, name="campaign-export"),
    path("campaigns/<int:pk>/results/", results_views.campaign_results, name="campaign-results"),
    path("campaigns/<int:pk>/results.<str:fmt>", results_views.campaign_results_export, name="campaign-results-export"),
    path("campaigns/<int:pk>/crowd", views.campaign_crowd, name="campaign-crowd"),
    path("campaigns/<int:pk>/ledger", views.campaign_ledger, name="campaign-ledger"),
]
