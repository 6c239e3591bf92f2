"""Roles as Django groups: annotator, curator, admin.

A superuser counts as admin; an admin can do everything a curator can. Views use
``role_required``; API views use the DRF permission classes below; templates read ``roles``.
"""
from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from rest_framework.permissions import BasePermission

ANNOTATOR = "annotator"
CURATOR = "curator"
ADMIN = "admin"
ROLES = (ANNOTATOR, CURATOR, ADMIN)

# Which roles satisfy a requirement: an admin may act as curator.
_IMPLIED = {ANNOTATOR: {ANNOTATOR}, CURATOR: {CURATOR, ADMIN}, ADMIN: {ADMIN}}


def user_roles(user) -> set[str]:
    if not user or not user.is_authenticated or not user.is_active:
        return set()
    cached = getattr(user, "_captionlab_roles", None)
    if cached is None:
        cached = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
        if user.is_superuser:
            cached.add(ADMIN)
        user._captionlab_roles = cached
    return cached


def has_role(user, role: str) -> bool:
    return bool(user_roles(user) & _IMPLIED[role])


def primary_role(user) -> str | None:
    roles = user_roles(user)
    for role in (ADMIN, CURATOR, ANNOTATOR):
        if role in roles:
            return role
    return None


def role_required(role: str):
    """View decorator: anonymous users go to the login page, users without the role get 403."""

    def decorator(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, role):
                raise PermissionDenied(f"This page needs the {role} role.")
            return view(request, *args, **kwargs)

        return wrapper

    return decorator


class _RolePermission(BasePermission):
    role = CURATOR
    message = "This endpoint needs the curator role."

    def has_permission(self, request, view):
        return has_role(request.user, self.role)


class IsCurator(_RolePermission):
    role = CURATOR


class IsAdmin(_RolePermission):
    role = ADMIN
    message = "This endpoint needs the admin role."


def roles_context(request):
    user = getattr(request, "user", None)
    roles = user_roles(user)
    return {
        "roles": roles,
        "is_curator": has_role(user, CURATOR) if roles else False,
        "is_admin": ADMIN in roles,
        "primary_role": primary_role(user) if roles else None,
    }
