"""The queue and the leases: which replica runs which evaluation, and which sends its A2A task's updates.

A queued evaluation is claimed by exactly one replica: a claim is a
compare-and-set on its status (`UPDATE ... WHERE status = 'queued'`), taken
under `FOR UPDATE SKIP LOCKED` where the database has it, so replicas skip
each other's rows instead of waiting on them.

Leases: a replica that runs an evaluation (or holds the bearer token a queued
one needs) owns its row until `lease_until`, and renews the lease while it
lives. A row whose lease ran out belongs to a replica that died; another takes
it over. The A2A task that reports an evaluation has a lease of its own
(`follower`): the replica that received the request sends its updates, which
need not be the one running the evaluation. On SQLite (one service at a
time) the service that starts takes over every row at once; a PostgreSQL
replica takes back at once the rows it held under its own name before a restart.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Column, and_, func, or_, select, true, update

from tau2_a2a.service.jobs.database import Database, evaluations, record_of
from tau2_a2a.service.jobs.evaluation import EvaluationRecord, Status

if TYPE_CHECKING:
    from sqlalchemy import ColumnElement, Row

QUEUED, RUNNING = Status.QUEUED.value, Status.RUNNING.value
ACTIVE = (QUEUED, RUNNING)


@dataclass(frozen=True)
class FollowedTask:
    """The A2A task that reports an evaluation."""

    evaluation_id: str
    task_id: str
    context_id: str | None


def replica_name(port: int | None = None) -> str:
    """A replica's id: stable across restarts on one host and port, so a restarted replica takes its rows back."""
    return f"{os.uname().nodename}:{port}" if port else f"{os.uname().nodename}:pid{os.getpid()}"


class EvaluationQueue:
    def __init__(self, database: Database) -> None:
        self.database = database

    # -- the queue -------------------------------------------------------------------

    def position(self, evaluation_id: str) -> int | None:
        """1 for the next evaluation to start; None when it is not queued."""
        mine = select(evaluations.c.seq).where(and_(evaluations.c.evaluation_id == evaluation_id,
                                                    evaluations.c.status == QUEUED)).scalar_subquery()
        with self.database.reading() as connection:
            if connection.execute(select(mine)).scalar() is None:
                return None
            return connection.execute(select(func.count()).where(
                and_(evaluations.c.status == QUEUED, evaluations.c.seq <= mine))).scalar()

    def queued_count(self) -> int:
        with self.database.reading() as connection:
            return connection.execute(select(func.count()).where(evaluations.c.status == QUEUED)).scalar() or 0

    def claim_queued(self, replica: str, lease_until: float) -> EvaluationRecord | None:
        """The next queued evaluation `replica` may run, now running and owned by it; None if there is none."""
        free_or_mine = or_(evaluations.c.owner.is_(None), evaluations.c.owner == replica)
        with self.database.transaction() as connection:
            for candidate in connection.execute(
                    select(evaluations.c.evaluation_id)
                    .where(and_(evaluations.c.status == QUEUED, free_or_mine))
                    .order_by(evaluations.c.seq).limit(8).with_for_update(skip_locked=True)).scalars():
                claimed = connection.execute(update(evaluations).where(and_(
                    evaluations.c.evaluation_id == candidate, evaluations.c.status == QUEUED, free_or_mine))
                    .values(status=RUNNING, owner=replica, lease_until=lease_until))
                if claimed.rowcount == 1:
                    return record_of(connection.execute(select(evaluations).where(
                        evaluations.c.evaluation_id == candidate)).one())
        return None

    def cancel_queued(self, evaluation_id: str) -> bool:
        """Take a queued evaluation off the queue, now canceled (compare-and-set); whether it was still queued."""
        with self.database.transaction() as connection:
            return connection.execute(update(evaluations).where(and_(
                evaluations.c.evaluation_id == evaluation_id, evaluations.c.status == QUEUED))
                .values(status=Status.CANCELED.value, owner=None, lease_until=None)).rowcount == 1

    def requeue(self, evaluation_id: str, replica: str) -> None:
        """A queued row taken over from a gone replica goes back to the shared queue."""
        with self.database.transaction() as connection:
            connection.execute(update(evaluations).where(and_(
                evaluations.c.evaluation_id == evaluation_id, evaluations.c.owner == replica,
                evaluations.c.status == QUEUED)).values(owner=None, lease_until=None))

    # -- cancel requests, for the replica that runs the evaluation -------------------------------

    def request_cancel(self, evaluation_id: str) -> None:
        with self.database.transaction() as connection:
            connection.execute(update(evaluations).where(and_(
                evaluations.c.evaluation_id == evaluation_id, evaluations.c.status.in_(ACTIVE)))
                .values(cancel_requested=True))

    def cancel_requests(self, replica: str) -> set[str]:
        with self.database.reading() as connection:
            return set(connection.execute(select(evaluations.c.evaluation_id).where(and_(
                evaluations.c.owner == replica, evaluations.c.cancel_requested.is_(True)))).scalars())

    # -- leases ------------------------------------------------------------------------

    def renew(self, replica: str, lease_until: float) -> set[str]:
        """Extend `replica`'s leases (evaluations and A2A tasks); the evaluation ids it still owns."""
        with self.database.transaction() as connection:
            connection.execute(update(evaluations).where(evaluations.c.owner == replica)
                               .values(lease_until=lease_until))
            connection.execute(update(evaluations).where(evaluations.c.follower == replica)
                               .values(follower_until=lease_until))
            return set(connection.execute(select(evaluations.c.evaluation_id)
                                          .where(evaluations.c.owner == replica)).scalars())

    def release(self, replica: str) -> None:
        """Give up `replica`'s rows at once (a clean shutdown): the next replica resumes them."""
        with self.database.transaction() as connection:
            connection.execute(update(evaluations).where(evaluations.c.owner == replica)
                               .values(lease_until=0.0))
            connection.execute(update(evaluations).where(evaluations.c.follower == replica)
                               .values(follower_until=0.0))

    def claim_expired(self, replica: str, lease_until: float, now: float,
                      at_start: bool = False) -> list[EvaluationRecord]:
        """Queued or running evaluations whose owner is gone, now owned by `replica`."""
        owner, lease = evaluations.c.owner, evaluations.c.lease_until
        stale = self._stale(owner, lease, replica, now, at_start)
        taken = self._take_over(owner, lease, replica, lease_until, and_(evaluations.c.status.in_(ACTIVE), stale))
        return [record_of(row) for row in taken]

    # -- the A2A tasks that report evaluations ------------------------------------------------

    def link_task(self, evaluation_id: str, task_id: str, context_id: str, follower: str,
                  follower_until: float) -> None:
        with self.database.transaction() as connection:
            connection.execute(update(evaluations).where(evaluations.c.evaluation_id == evaluation_id)
                               .values(task_id=task_id, context_id=context_id, follower=follower,
                                       follower_until=follower_until))

    def evaluation_of_task(self, task_id: str) -> str | None:
        """The evaluation the A2A task `task_id` reports, if any."""
        with self.database.transaction() as connection:
            return connection.execute(select(evaluations.c.evaluation_id)
                                      .where(evaluations.c.task_id == task_id)).scalar()

    def unlink_task(self, evaluation_id: str) -> None:
        with self.database.transaction() as connection:
            connection.execute(update(evaluations).where(evaluations.c.evaluation_id == evaluation_id)
                               .values(follower=None, follower_until=None))

    def claim_orphaned_tasks(self, follower: str, follower_until: float, now: float,
                             at_start: bool = False) -> list[FollowedTask]:
        """A2A tasks that lost their follower, now followed by `follower`."""
        holder, lease = evaluations.c.follower, evaluations.c.follower_until
        taken = self._take_over(holder, lease, follower, follower_until,
                                self._stale(holder, lease, follower, now, at_start))
        return [FollowedTask(row.evaluation_id, row.task_id, row.context_id) for row in taken]

    # -- taking over ----------------------------------------------------------------------

    def _stale(self, holder: Column[str], lease: Column[float], me: str, now: float,
               at_start: bool) -> ColumnElement[bool]:
        """Rows whose holder is gone: its lease ran out; at start also our own earlier life's (all, on SQLite)."""
        if at_start and not self.database.shared:
            return true()
        stale = lease < now
        return or_(stale, holder == me) if at_start else stale

    def _take_over(self, holder: Column[str], lease: Column[float], me: str, until: float,
                   where: ColumnElement[bool]) -> list[Row[Any]]:
        """Make `me` the holder of the held rows matching `where` (a compare-and-set on the previous holder)."""
        taken = []
        with self.database.transaction() as connection:
            candidates = connection.execute(
                select(evaluations.c.evaluation_id, holder).where(and_(holder.is_not(None), where))
                .with_for_update(skip_locked=True)).all()
            for candidate, previous in candidates:
                claimed = connection.execute(update(evaluations).where(and_(
                    evaluations.c.evaluation_id == candidate, holder == previous))
                    .values({holder.name: me, lease.name: until}))
                if claimed.rowcount == 1:
                    taken.append(connection.execute(select(evaluations).where(
                        evaluations.c.evaluation_id == candidate)).one())
        return taken
