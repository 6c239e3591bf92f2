"""The annotator's work pages: the campaigns list and the page that serves one task at a time.

Progressive enhancement: every action (vote, undo, skip, continue after a training example) is a
plain form POST or link that works without JavaScript (POST, then redirect, then GET). With htmx
the same forms carry ``hx-post`` and these views answer with the task panel only, so the next task
is swapped in without a page load. Refusals from routing (``RoutingError``) are shown in the panel
with their own HTTP status; the value the annotator typed or picked is put back into the form.

Who may use them: members of the campaign with the annotator role (``routing.membership_for``
raises 404 for strangers and 403 for blocked workers); curators and admins who are not members get
a read-only preview; users without a role get 403.

Queries per request are constant: the task comes with its image and caption
(``routing.next_task``), candidate captions come in one ``in_bulk`` and progress in three counts.

Modules: ``access`` (who is asking, the ``work_view`` decorator), ``pages`` (whole pages: the
campaigns list and the work page), ``panel`` (the task panel fragment every view renders) and
``actions`` (the POSTs that answer with the next panel: submit, undo, skip).
"""
from __future__ import annotations

from .actions import work_skip, work_submit, work_undo
from .pages import annotator_campaigns, annotator_home_context, work_list, work_page

__all__ = ["annotator_campaigns", "annotator_home_context", "work_list", "work_page", "work_submit", "work_undo",
           "work_skip"]
