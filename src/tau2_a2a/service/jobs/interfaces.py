"""The job core's parts as small interfaces: the records, the queue and its leases, the clock, the children.

The scheduler and the supervisor depend on these, not on SQL or processes, so
they can be tested alone (memory.py has the in-memory versions, beside the SQL
ones in store.py and queue.py; child.py's ChildOptions is the real starter).
A new job-store backend implements RecordStore and JobQueue over one shared
table of evaluations: a row's status, its owner and lease, its cancel request,
and the A2A task that follows it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tau2_a2a.service.jobs.evaluation import EvaluationRecord
    from tau2_a2a.service.jobs.queue import FollowedTask
    from tau2_a2a.service.jobs.warm import ForkServer
    from tau2_a2a.service.request import EvaluationRequest


class RecordStore(Protocol):
    """The evaluations' records: written, read, listed. Which replica runs what is the queue's."""

    def insert(self, record: EvaluationRecord, held_by: str | None = None,
               lease_until: float | None = None) -> None:
        """A new evaluation, at the end of the queue; held by `held_by` until `lease_until` when given."""

    def save(self, record: EvaluationRecord, held_by: str | None) -> bool:
        """Write the record; with `held_by`, only while that replica holds the row. Whether it was written.
        An ended evaluation is held by nobody from then on (its lease and cancel request dropped)."""

    def get(self, evaluation_id: str) -> EvaluationRecord | None: ...

    def all(self) -> list[EvaluationRecord]:
        """Every record, in the order the evaluations were queued."""

    def ids(self) -> set[str]: ...


class JobQueue(Protocol):
    """The queue and the leases on the store's rows: claims, renewals, take-overs, cancel requests, and the
    A2A tasks that report evaluations. Every claim is a compare-and-set: one replica wins it."""

    def position(self, evaluation_id: str) -> int | None:
        """1 for the next evaluation to start; None when it is not queued."""

    def queued_count(self) -> int: ...

    def claim_queued(self, replica: str, lease_until: float) -> EvaluationRecord | None:
        """The next queued evaluation that is free or `replica`'s, now running and owned by it."""

    def cancel_queued(self, evaluation_id: str) -> bool:
        """A queued evaluation, now canceled; whether it was still queued."""

    def requeue(self, evaluation_id: str, replica: str) -> None:
        """A queued row `replica` took over goes back to the shared queue."""

    def request_cancel(self, evaluation_id: str) -> None:
        """Ask the replica running an active evaluation to stop it."""

    def cancel_requests(self, replica: str) -> set[str]:
        """The evaluations of `replica` asked to stop."""

    def renew(self, replica: str, lease_until: float) -> set[str]:
        """Extend `replica`'s leases (evaluations and A2A tasks); the evaluation ids it still owns."""

    def release(self, replica: str) -> None:
        """Give up `replica`'s leases at once (a clean shutdown)."""

    def claim_expired(self, replica: str, lease_until: float, now: float,
                      at_start: bool = False) -> list[EvaluationRecord]:
        """Active evaluations whose owner's lease ran out (at start: also `replica`'s own earlier life's, and on
        a store one service uses alone, every one), now owned by `replica`."""

    def link_task(self, evaluation_id: str, task_id: str, context_id: str, follower: str,
                  follower_until: float) -> None: ...

    def evaluation_of_task(self, task_id: str) -> str | None: ...

    def unlink_task(self, evaluation_id: str) -> None: ...

    def claim_orphaned_tasks(self, follower: str, follower_until: float, now: float,
                             at_start: bool = False) -> list[FollowedTask]:
        """A2A tasks whose follower's lease ran out (at start as claim_expired), now followed by `follower`."""


class Clock(Protocol):
    """The scheduler's time: leases are epoch seconds (`time`); upkeep runs every so often (`wait`)."""

    def time(self) -> float: ...

    def wait(self, stopped: threading.Event, seconds: float) -> bool:
        """Until `stopped` is set (True) or `seconds` passed on this clock (False)."""


class SystemClock:
    """The machine's clock."""

    def time(self) -> float:
        return time.time()

    def wait(self, stopped: threading.Event, seconds: float) -> bool:
        return stopped.wait(seconds)


SYSTEM_CLOCK = SystemClock()


class ChildProcess(Protocol):
    """One run of an evaluation's child, as the supervisor sees it."""

    @property
    def pid(self) -> int: ...

    @property
    def not_started(self) -> str | None:
        """For a child whose process never started (its start ran on a thread of its own): the kind of
        error that stopped it; None for one that started."""

    def wait(self) -> int:
        """Block until the child exits; its exit code (negative: the signal that killed it)."""

    def stop(self) -> None:
        """Stop the child keeping its finished simulations; returns once it has exited."""


class ChildStarter(Protocol):
    """How the supervisor starts an evaluation's child (ChildOptions, child.py)."""

    def start(self, request: EvaluationRequest, directory: Path, token: str | None,
              trace_parent: dict[str, str] | None = None, forkserver: ForkServer | None = None) -> ChildProcess:
        """Start the evaluation's child in `directory`, handing it `token`; raises when it cannot start."""

    def forkserver(self) -> ForkServer | None:
        """The fork server children are forked from (not started), or None."""
