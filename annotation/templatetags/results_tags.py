"""Template tags of campaign results: the write campaign's card on the dashboard."""
from django import template

register = template.Library()


@register.inclusion_tag("annotation/campaigns/_write_summary.html")
def write_summary_card(campaign):
    """Captions written, images covered and best captions chosen (``annotation.best_caption``)."""
    from annotation.best_caption import write_summary

    return {"campaign": campaign, "summary": write_summary(campaign)}
