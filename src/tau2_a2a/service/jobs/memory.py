"""The records and the queue in memory: one process's table of evaluations, for tests and trials.

They keep the SQL versions' contract (store.py, queue.py; the same contract
tests run against both): one row per evaluation with its status, owner and
lease, cancel request and followed A2A task; every claim a compare-and-set
under one lock. Nothing survives the process. `shared=True` makes the table
behave as a database replicas share (PostgreSQL), False as one service's own
(SQLite): at start, that one takes over every active row at once.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from tau2_a2a.service.jobs.evaluation import EvaluationRecord, Status
from tau2_a2a.service.jobs.interfaces import JobQueue, RecordStore
from tau2_a2a.service.jobs.queue import FollowedTask


@dataclass
class Row:
    """One evaluation's row: what the SQL table's columns hold."""

    seq: int
    record: EvaluationRecord
    owner: str | None = None
    lease_until: float | None = None
    cancel_requested: bool = False
    task_id: str | None = None
    context_id: str | None = None
    follower: str | None = None
    follower_until: float | None = None

    @property
    def status(self) -> Status:
        return self.record.status


class MemoryTable:
    """The rows MemoryStore and MemoryQueue share, as the SQL ones share a Database."""

    def __init__(self, shared: bool = False) -> None:
        self.shared = shared
        self.rows: dict[str, Row] = {}
        self.lock = threading.Lock()
        self._seq = itertools.count(1)

    def next_seq(self) -> int:
        return next(self._seq)

    def in_order(self) -> Iterator[Row]:
        return iter(sorted(self.rows.values(), key=lambda row: row.seq))


class MemoryStore:
    """The RecordStore of a MemoryTable."""

    def __init__(self, table: MemoryTable) -> None:
        self.table = table

    def insert(self, record: EvaluationRecord, held_by: str | None = None, lease_until: float | None = None) -> None:
        with self.table.lock:
            if record.evaluation_id in self.table.rows:
                raise KeyError(f"evaluation {record.evaluation_id} is stored already")
            self.table.rows[record.evaluation_id] = Row(self.table.next_seq(), record, owner=held_by,
                                                        lease_until=lease_until)

    def save(self, record: EvaluationRecord, held_by: str | None) -> bool:
        with self.table.lock:
            row = self.table.rows.get(record.evaluation_id)
            if row is None or (held_by is not None and row.owner != held_by):
                return False
            row.record = record
            if not record.status.active:
                row.owner, row.lease_until, row.cancel_requested = None, None, False
            return True

    def get(self, evaluation_id: str) -> EvaluationRecord | None:
        with self.table.lock:
            row = self.table.rows.get(evaluation_id)
            return row.record if row else None

    def all(self) -> list[EvaluationRecord]:
        with self.table.lock:
            return [row.record for row in self.table.in_order()]

    def ids(self) -> set[str]:
        with self.table.lock:
            return set(self.table.rows)


def _with_status(row: Row, status: Status) -> None:
    """The status column changed alone (the SQL versions keep it apart from the record's JSON)."""
    row.record = replace(row.record, status=status)


class MemoryQueue:
    """The JobQueue of a MemoryTable."""

    def __init__(self, table: MemoryTable) -> None:
        self.table = table

    # -- the queue -------------------------------------------------------------------

    def position(self, evaluation_id: str) -> int | None:
        with self.table.lock:
            queued = [row.record.evaluation_id for row in self.table.in_order() if row.status == Status.QUEUED]
        return queued.index(evaluation_id) + 1 if evaluation_id in queued else None

    def queued_count(self) -> int:
        with self.table.lock:
            return sum(1 for row in self.table.rows.values() if row.status == Status.QUEUED)

    def claim_queued(self, replica: str, lease_until: float) -> EvaluationRecord | None:
        with self.table.lock:
            for row in self.table.in_order():
                if row.status == Status.QUEUED and row.owner in (None, replica):
                    _with_status(row, Status.RUNNING)
                    row.owner, row.lease_until = replica, lease_until
                    return row.record
        return None

    def cancel_queued(self, evaluation_id: str) -> bool:
        with self.table.lock:
            row = self.table.rows.get(evaluation_id)
            if row is None or row.status != Status.QUEUED:
                return False
            _with_status(row, Status.CANCELED)
            row.owner, row.lease_until = None, None
            return True

    def requeue(self, evaluation_id: str, replica: str) -> None:
        with self.table.lock:
            row = self.table.rows.get(evaluation_id)
            if row is not None and row.owner == replica and row.status == Status.QUEUED:
                row.owner, row.lease_until = None, None

    # -- cancel requests ---------------------------------------------------------------

    def request_cancel(self, evaluation_id: str) -> None:
        with self.table.lock:
            row = self.table.rows.get(evaluation_id)
            if row is not None and row.status.active:
                row.cancel_requested = True

    def cancel_requests(self, replica: str) -> set[str]:
        with self.table.lock:
            return {eid for eid, row in self.table.rows.items() if row.owner == replica and row.cancel_requested}

    # -- leases ------------------------------------------------------------------------

    def renew(self, replica: str, lease_until: float) -> set[str]:
        with self.table.lock:
            for row in self.table.rows.values():
                if row.owner == replica:
                    row.lease_until = lease_until
                if row.follower == replica:
                    row.follower_until = lease_until
            return {eid for eid, row in self.table.rows.items() if row.owner == replica}

    def release(self, replica: str) -> None:
        with self.table.lock:
            for row in self.table.rows.values():
                if row.owner == replica:
                    row.lease_until = 0.0
                if row.follower == replica:
                    row.follower_until = 0.0

    def claim_expired(self, replica: str, lease_until: float, now: float,
                      at_start: bool = False) -> list[EvaluationRecord]:
        stale = self._stale(replica, now, at_start)
        with self.table.lock:
            taken = []
            for row in self.table.in_order():
                if row.owner is not None and row.status.active and stale(row.owner, row.lease_until):
                    row.owner, row.lease_until = replica, lease_until
                    taken.append(row.record)
            return taken

    # -- the A2A tasks that report evaluations ------------------------------------------------

    def link_task(self, evaluation_id: str, task_id: str, context_id: str, follower: str,
                  follower_until: float) -> None:
        with self.table.lock:
            row = self.table.rows.get(evaluation_id)
            if row is not None:
                row.task_id, row.context_id, row.follower, row.follower_until = (task_id, context_id, follower,
                                                                                follower_until)

    def evaluation_of_task(self, task_id: str) -> str | None:
        with self.table.lock:
            return next((eid for eid, row in self.table.rows.items() if row.task_id == task_id), None)

    def unlink_task(self, evaluation_id: str) -> None:
        with self.table.lock:
            row = self.table.rows.get(evaluation_id)
            if row is not None:
                row.follower, row.follower_until = None, None

    def claim_orphaned_tasks(self, follower: str, follower_until: float, now: float,
                             at_start: bool = False) -> list[FollowedTask]:
        stale = self._stale(follower, now, at_start)
        with self.table.lock:
            taken = []
            for row in self.table.in_order():
                if row.follower is not None and stale(row.follower, row.follower_until):
                    row.follower, row.follower_until = follower, follower_until
                    assert row.task_id is not None
                    taken.append(FollowedTask(row.record.evaluation_id, row.task_id, row.context_id))
            return taken

    def _stale(self, me: str, now: float, at_start: bool) -> Callable[[str, float | None], bool]:
        """Whether a row's holder is gone: its lease ran out; at start also our own earlier life's (every
        holder, on a table one service uses alone). A row held without a lease is not stale (as SQL's NULL)."""
        def stale(holder: str, lease: float | None) -> bool:
            if at_start and not self.table.shared:
                return True
            return (lease is not None and lease < now) or (at_start and holder == me)
        return stale


def memory_store_and_queue(shared: bool = False) -> tuple[RecordStore, JobQueue]:
    """A store and a queue over one new in-memory table."""
    table = MemoryTable(shared)
    return MemoryStore(table), MemoryQueue(table)
