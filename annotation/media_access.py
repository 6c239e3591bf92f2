"""Who may see an image's file besides curators: an annotator, while the image is an item of a campaign they
may work in, one they are a member of and not blocked from, or a running campaign open to every annotator
(which they may join at any time). Registered with ``curation.extensions`` by ``AnnotationConfig.ready()``;
``curation.views_media`` asks it."""
from django.db.models import Q


def annotator_may_see(user, image_id: int) -> bool:
    """True when ``image_id`` is an item of a campaign the annotator may work in."""
    from .models import Campaign, Task

    reachable = (
        Q(campaign__memberships__worker__user=user, campaign__memberships__blocked=False)
        | Q(campaign__open_to_all=True, campaign__status=Campaign.Status.RUNNING)
    )
    return Task.objects.filter(reachable, image_id=image_id).exists()
