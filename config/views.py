"""The home page: one per role, each put together from the apps (curation's latest collections and
imports for curators and admins, annotation's open campaigns for annotators)."""
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.db.models import Count
from django.shortcuts import render

from annotation.web.annotator.views import annotator_home_context
from captionlab import roles
from curation.views import curator_home_context


@login_required
def home(request):
    role = roles.primary_role(request.user)
    if role in (roles.CURATOR, roles.ADMIN):
        context = curator_home_context()
        if role == roles.ADMIN:
            context.update(_admin_counts())
        return render(request, f"home/{role}.html", context)
    if role == roles.ANNOTATOR:
        return render(request, "home/annotator.html", annotator_home_context(request.user))
    return render(request, "home/no_role.html", {})


def _admin_counts() -> dict:
    """The admin's home page: active users per role and those without one."""
    users = get_user_model().objects.filter(is_active=True)
    per_role = dict(
        Group.objects.filter(name__in=roles.ROLES, user__is_active=True)
        .annotate(n=Count("user")).values_list("name", "n")
    )
    return {
        "role_counts": [(name, per_role.get(name, 0)) for name in roles.ROLES],
        "user_total": users.count(),
        "users_without_role": users.filter(is_superuser=False).exclude(groups__name__in=roles.ROLES).count(),
    }
