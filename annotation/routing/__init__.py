"""Task routing and votes: the annotator's hot path.

Modules, one responsibility each (the names below are re-exported here, so
``from annotation.routing import next_task`` keeps working):

- ``claiming``: the next task, reserved to the worker (``next_task``, ``Served``);
- ``submitting``: a vote on a reserved task, replays and late votes (``submit_vote``, ``Submitted``);
- ``editing``: undo within the edit window (``edit_vote``, ``last_editable_vote``);
- ``expiry``: expired reservations back to the pool, and skips (``sweep_expired``, ``release``);
- ``blocking``: blocked workers and external assignments confirmed, discarded or withdrawn;
- ``counting``: a task's counters once a vote counts (dynamic overlap, entropy);
- ``members``: workers, memberships, assignments and stages; ``hotsql``: the plain-SQL plumbing.

Invariants, kept under concurrency:
- a task's ``votes_count`` and ``reserved_count`` change only while its row is locked, so
  ``votes_count + reserved_count <= votes_required`` always holds for real tasks and every task
  ends with exactly its required votes;
- a worker holds at most one reservation per task (unique) and one vote per task (unique), so no
  worker votes twice on a task, and a replayed or simultaneous duplicate submit finds the vote and
  returns it (never an IntegrityError);
- a vote sent after its reservation expired is taken when the task still has room for it (its
  expired reservation still holds the slot, or a free slot is taken under the row lock) and the
  worker has not voted on it; otherwise it is refused with 410.

Lock order (the whole app; PostgreSQL row locks, taken in this order, never the reverse):

1. the campaign row. The hot path only ever takes it SHARED, ``FOR KEY SHARE``: explicitly, in
   the vote's first statement, and implicitly through the foreign-key check of every insert that
   references the campaign (a vote, a reservation, an assignment). Anything that writes the
   campaign row (aggregation's stats, a curator's settings) takes it FIRST and with
   ``FOR NO KEY UPDATE`` (``select_for_update(no_key=True)``; a plain ``UPDATE`` of non-key
   columns does the same), never ``FOR UPDATE``: that is the one mode that conflicts with
   ``FOR KEY SHARE``, so it makes every vote and claim of the campaign wait;
2. task rows: ``FOR NO KEY UPDATE`` (or an ``UPDATE``), several in ascending id, never
   ``FOR UPDATE``, so the ``FOR KEY SHARE`` that an insert of an ``Aggregate`` or ``Vote`` row
   takes on its task never waits on routing;
3. the task's reservations, then its votes (insert, update, delete);
4. aggregate rows of those tasks (a per-task aggregate updated together with the vote);
5. membership rows (``votes``, ``seconds``, ``gold_*``, ``reliability``), several in ascending
   worker id;
6. the assignment row (``tasks_done``, ``seconds``); then worker rows.

A transaction may skip levels but never goes back up: once it holds a membership row it takes no
task or campaign lock, not even the key share of an insert (make such an insert before the
membership update, or take the key share first, as the vote does). Who takes what:

- vote (``submitting``): campaign (key share) + task, in one statement -> reservation -> vote ->
  task counters -> membership -> assignment;
- claim (``claiming``): task (``FOR NO KEY UPDATE SKIP LOCKED``) -> reservation; its campaign key
  share comes from the reservation insert at the statement's end, which is safe because whoever
  holds the campaign exclusively never waits for a task row's ``NO KEY UPDATE`` lock (rule 2);
- sweep, skip, block, confirm/discard/withdraw (``expiry``, ``blocking``): one task per
  transaction -> its reservations and votes -> (blocking) no membership inside those transactions;
- undo (``editing``): the vote row only (``FOR NO KEY UPDATE OF`` the vote) -> membership;
- aggregation (``annotation.aggregation``, not in this package) must take: campaign
  (``FOR NO KEY UPDATE``, first) -> aggregate rows (their inserts key-share the tasks) ->
  memberships (``reliability``, ascending worker id); it must not update task rows while it holds
  the campaign with ``FOR UPDATE``.

The vote path used to update its membership row before the foreign-key check of its vote insert
(PostgreSQL runs those checks at the end of the statement) took the campaign's key share, and both
the vote and the claim held their task row ``FOR UPDATE``; aggregation, holding the campaign
``FOR UPDATE``, waited for those task rows (its aggregate inserts) and for the memberships: a
deadlock (issue 23). ``tests/annotation/test_votes_with_aggregation.py`` builds that moment on
purpose and also runs votes and aggregation together for 30 s.

On PostgreSQL the next task is chosen with ``FOR NO KEY UPDATE SKIP LOCKED``: concurrent workers
skip a row another worker is reserving instead of queueing on it. SQLite has no row locks; there a
write transaction locks the database, which is correct, only slower.

Speed (the annotator's loop runs hundreds of times a second): on PostgreSQL a claim is one
statement and a plain vote is two (the task row locked together with the campaign and the worker's
reservation, then the vote insert, reservation delete and counter updates in one CTE); everything
else, and every other database, takes the ORM path, which keeps the same invariants. The number of
queries of a fetch and of a submit does not depend on the campaign's size
(tests/annotation/test_api_hot.py).
"""
from __future__ import annotations

import random  # noqa: F401 - tests patch annotation.routing.random.random to serve gold items

from .blocking import block_worker, confirm_assignment, discard_assignment, withdraw_votes
from .claiming import Served, claim_real, next_task
from .counting import entropy
from .editing import edit_vote, last_editable_vote
from .errors import RoutingError
from .expiry import release, sweep_expired
from .hotsql import hot_cursor
from .members import (
                      ensure_assignment,
                      member_access,
                      membership_for,
                      refuse_blocked,
                      settle_stage,
                      stage_of,
                      worker_for_user,
)
from .submitting import Submitted, feed_rating_campaign, submit_vote

__all__ = ["confirm_assignment", "discard_assignment", "withdraw_votes", "RoutingError", "Served", "Submitted",
           "next_task", "submit_vote", "edit_vote", "release", "sweep_expired", "block_worker", "worker_for_user",
           "membership_for", "member_access", "refuse_blocked", "last_editable_vote", "feed_rating_campaign",
           "entropy", "stage_of", "hot_cursor",
           "ensure_assignment", "settle_stage", "claim_real"]
