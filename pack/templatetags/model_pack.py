"""The collection page's model-pack panel ({% model_pack_panel collection %}): embed with a registered model,
the latest embedding jobs. A tag, so the curation app's views need not know the pack's views."""
from django import template

register = template.Library()


@register.inclusion_tag("pack/_collection_panel.html", takes_context=True)
def model_pack_panel(context, collection):
    from pack.views import collection_panel

    return {"collection": collection, "csrf_token": context.get("csrf_token"), **collection_panel(collection)}
