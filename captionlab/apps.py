from django.apps import AppConfig


class CaptionLabConfig(AppConfig):
    name = "captionlab"
    verbose_name = "CaptionLab"
