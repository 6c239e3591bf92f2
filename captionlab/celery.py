"""The Celery application. Workers: ``celery -A captionlab worker -Q default,filters``."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "captionlab.settings")

app = Celery("captionlab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
