"""The scheduler: which evaluations this replica runs, and when; what their ends are recorded as.

- Restarts and replicas: records and the queue live in one SQL database
  (store.py, queue.py). A scheduler that starts takes up the evaluations a
  stopped one left: a queued one waits again; a running one resumes, its
  child restarting on the same results file so tau2 redoes no finished
  simulation. Replicas on one PostgreSQL database share the queue; a
  replica's evaluations are held under a lease it renews, and another replica
  takes them over when it dies.
- Secrets: the target's bearer token is held in memory only, handed to the
  child (child.py) and dropped when the child ends. Records never hold it.
- Cancel: a child of this replica is stopped keeping every finished
  simulation; one of another replica is asked to stop through the database.
- One lock orders everything the scheduler does: a submit, a cancel, a
  child's end and the next start, and the maintenance tick that renews leases,
  passes on cancel requests and takes over what dead replicas left.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from tau2_a2a.client import tracing
from tau2_a2a.errors import first_line
from tau2_a2a.service.jobs.database import database_reachable
from tau2_a2a.service.jobs.directory import PRIVATE_DIR, results_file
from tau2_a2a.service.jobs.errors import EvaluationError
from tau2_a2a.service.jobs.evaluation import EvaluationRecord, Status
from tau2_a2a.service.jobs.interfaces import SYSTEM_CLOCK, ChildStarter, Clock, JobQueue, RecordStore
from tau2_a2a.service.jobs.limits import Limits
from tau2_a2a.service.jobs.outcome import ending
from tau2_a2a.service.jobs.progress import final_result
from tau2_a2a.service.jobs.queue import FollowedTask
from tau2_a2a.service.jobs.supervisor import Job, Supervisor

log = logging.getLogger("tau2_a2a.service")

TOKEN_LOST = ("the target's bearer token was held only in the memory of the service process that stopped "
              "(it is never stored); finished simulations are kept. Submit the evaluation again with "
              "agent_auth_token.")
NOT_STARTED = ("the service could not start this evaluation's process ({kind}); finished simulations, if any, "
               "are kept. Submit it again later, or ask the service's operator: its log says why.")


class Scheduler:
    """Runs the evaluations of `store` and `queue` under `root` as replica `replica`, at most
    `limits.max_running` at once, their children started by `children`. `lease_seconds` (on `clock`) is how
    long a replica that stopped answering keeps its evaluations before another takes them over; upkeep
    (tick) runs every tenth of it. `on_end(evaluation_id)` is told when an evaluation ends."""

    def __init__(self, root: Path, store: RecordStore, queue: JobQueue, children: ChildStarter,
                 limits: Limits, replica: str, lease_seconds: float,
                 on_end: Callable[[str], None] = lambda evaluation_id: None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.root = root
        self.store = store
        self.queue = queue
        self.limits = limits
        self.replica = replica
        self.lease_seconds = lease_seconds
        self.clock = clock
        self.supervisor = Supervisor(children, self._exited)
        self._on_end = on_end
        self._tick = max(0.2, min(2.0, lease_seconds / 10))
        self._lock = threading.RLock()
        self._tokens: dict[str, str] = {}  # of queued evaluations received here; never stored
        self._trace_parents: dict[str, dict[str, str]] = {}  # with tracing on: the request each came in
        self._follow: Callable[[FollowedTask], None] | None = None
        self._orphaned_tasks: list[FollowedTask] = []
        self._closing = False
        self._stopped = threading.Event()
        self._maintainer: threading.Thread | None = None

    @property
    def closing(self) -> bool:
        return self._closing

    def start(self) -> None:
        """Take up what a stopped service left, start queued work, and go on doing so every tick."""
        self.supervisor.open()
        with self._lock:
            self._adopt_expired(at_start=True)
            self._dispatch()
        self._maintainer = threading.Thread(target=self._maintain, daemon=True, name="evaluations")
        self._maintainer.start()

    def close(self) -> None:
        """Stop: children are stopped with their results kept, and their evaluations released for the next
        service on this database (or another replica at once) to resume."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
        self._stopped.set()
        if self._maintainer is not None:
            self._maintainer.join(10)
        self.supervisor.stop_all(timeout=30)
        self.supervisor.close()
        try:
            self.queue.release(self.replica)
        except SQLAlchemyError as error:
            log.warning("could not release this replica's evaluations (%s); they are taken over when their "
                        "lease runs out", type(error).__name__)

    def settle(self) -> None:
        """Return once what the scheduler is doing now (recording an end and starting the next) is done."""
        with self._lock:
            pass

    # -- requests ------------------------------------------------------------------------

    def submit(self, record: EvaluationRecord, token: str | None) -> None:
        """Queue the evaluation, and start it if a slot is free. Only this replica holds `token`, so a queued
        evaluation that needs one waits for this replica."""
        with self._lock, database_reachable():
            if self._closing:
                raise EvaluationError("The service is shutting down; send the request again later.")
            if self.queue.queued_count() >= self.limits.max_queued:
                raise EvaluationError(
                    f"The evaluation queue is full ({self.limits.max_queued} waiting, "
                    f"{self.limits.max_running} running). Try again when one finishes."
                )
            (self.root / record.evaluation_id).mkdir(mode=PRIVATE_DIR)
            self.store.insert(record, held_by=self.replica if token else None,
                              lease_until=self._lease() if token else None)
            if token:
                self._tokens[record.evaluation_id] = token
            if tracing.enabled():  # its run continues the trace of the request that asked for it
                self._trace_parents[record.evaluation_id] = tracing.carrier()
            log.info("evaluation %s queued: %s on %s, %d simulations", record.evaluation_id,
                     record.request.agent_endpoint, record.request.domain, record.total_simulations)
            self._dispatch()

    def cancel(self, record: EvaluationRecord) -> None:
        """Stop the evaluation wherever it runs; finished simulations are kept."""
        evaluation_id = record.evaluation_id
        with self._lock, database_reachable():
            job = self.supervisor.job(evaluation_id)
            if job is not None:
                self.supervisor.stop(job)
            elif self.queue.cancel_queued(evaluation_id):
                self._tokens.pop(evaluation_id, None)
                self._trace_parents.pop(evaluation_id, None)
                self.store.save(self._ended(record, Status.CANCELED, None, False), None)
                log.info("evaluation %s canceled while queued", evaluation_id)
            else:  # running in another replica: it sees the request within a tick
                self.queue.request_cancel(evaluation_id)

    def link_task(self, evaluation_id: str, task_id: str, context_id: str) -> None:
        """The A2A task that follows this evaluation, so that a replica can continue it after a restart."""
        with database_reachable():
            self.queue.link_task(evaluation_id, task_id, context_id, self.replica, self._lease())

    def task_followed(self, evaluation_id: str) -> None:
        """The A2A task has its final event: nobody needs to continue it."""
        with database_reachable():
            self.queue.unlink_task(evaluation_id)

    def follow_tasks_with(self, follow: Callable[[FollowedTask], None]) -> None:
        """Continue A2A tasks whose follower died with `follow(task)`; from now on this replica takes them up."""
        with self._lock:
            self._follow = follow
            orphaned, self._orphaned_tasks = self._orphaned_tasks, []
        for task in orphaned:
            follow(task)

    # -- running ---------------------------------------------------------------------------

    def tick(self) -> None:
        """One round of upkeep: renew leases, stop what another replica took over or was asked to cancel,
        take over what dead replicas left, start queued work."""
        with self._lock:
            if self._closing:
                return
            owned = self.queue.renew(self.replica, self._lease())
            for job in self.supervisor.jobs():
                if job.evaluation_id not in owned and job.child is not None:
                    log.warning("evaluation %s: taken over by another replica; stopping here", job.evaluation_id)
                    self.supervisor.stop(job, taken_over=True)
            for evaluation_id in self.queue.cancel_requests(self.replica):
                canceled = self.supervisor.job(evaluation_id)
                if canceled is not None:
                    self.supervisor.stop(canceled)
            self._adopt_expired()
            self._dispatch()

    def _lease(self) -> float:
        return self.clock.time() + self.lease_seconds

    def _maintain(self) -> None:
        """Tick every so often on the clock until closed."""
        while not self.clock.wait(self._stopped, self._tick):
            try:
                self.tick()
            except SQLAlchemyError as error:
                log.warning("database unreachable (%s); evaluations keep running, retrying",
                            type(error).__name__)
            except Exception as error:  # the loop that renews leases outlives one tick that went wrong
                log.warning("evaluations' upkeep failed this time (%s: %s); retrying", type(error).__name__,
                            first_line(error))

    def _adopt_expired(self, at_start: bool = False) -> None:
        """Take over what a stopped replica left (caller holds the lock)."""
        for record in self.queue.claim_expired(self.replica, self._lease(), self.clock.time(), at_start=at_start):
            evaluation_id, here = record.evaluation_id, self.supervisor.job(record.evaluation_id) is not None
            if record.agent_auth and evaluation_id not in self._tokens and not here:
                log.info("evaluation %s: its target's token is gone with the replica that held it", evaluation_id)
                self.store.save(self._ended(record, Status.FAILED, TOKEN_LOST, False), self.replica)
            elif record.status == Status.QUEUED:
                if not record.agent_auth:  # back to the shared queue; one needing our token stays ours
                    self.queue.requeue(evaluation_id, self.replica)
            elif not here:
                log.info("evaluation %s: resuming what another service process left", evaluation_id)
                self._start(record, resumed=True)
        if self._follow is None and not at_start:
            return  # nobody here continues A2A tasks yet: leave them to a replica that does
        for task in self.queue.claim_orphaned_tasks(self.replica, self._lease(), self.clock.time(),
                                                      at_start=at_start):
            if self._follow is None:
                self._orphaned_tasks.append(task)
            else:
                self._follow(task)

    def _dispatch(self) -> None:
        """Start queued evaluations while this replica has free slots (caller holds the lock)."""
        while not self._closing and self.supervisor.running() < self.limits.max_running:
            record = self.queue.claim_queued(self.replica, self._lease())
            if record is None:
                return
            self._start(record)

    def _start(self, record: EvaluationRecord, resumed: bool = False) -> None:
        """Run the evaluation's child (caller holds the lock and owns the row)."""
        job = Job(record=record.running(self.replica, resumed), directory=self.root / record.evaluation_id,
                  token=self._tokens.pop(record.evaluation_id, None),
                  trace_parent=self._trace_parents.pop(record.evaluation_id, None))
        try:
            self.supervisor.start(job)
        except Exception as error:  # whatever it was, the evaluation ends here rather than stay running with no process
            log.warning("evaluation %s: its process could not start: %s", job.evaluation_id, first_line(error))
            failed = self._ended(job.record, Status.FAILED, NOT_STARTED.format(kind=type(error).__name__), False)
            self.store.save(failed, self.replica)
            return
        self.store.save(job.record, self.replica)
        assert job.child is not None
        # No pid here: a child waiting for the fork server has none yet, and asking would wait with the lock held.
        # The child logs its pid once it has started (warm.StartingProcess).
        log.info("evaluation %s %s", job.evaluation_id, "resumed" if resumed else "running")

    def _exited(self, job: Job, code: int) -> None:
        """A child of this replica exited: record how its evaluation ended, and start the next."""
        with self._lock:
            self.supervisor.forget(job)
            try:
                if not self._closing and job.child is not None:
                    kind = job.child.not_started
                    if kind is not None and not job.canceling:  # no process ran: as a start that raised
                        ended = self._ended(job.record, Status.FAILED, NOT_STARTED.format(kind=kind), False)
                    else:
                        end = ending(job.directory, code, job.canceling, job.token)
                        ended = self._ended(job.record, end.status, end.error, end.ran_every_simulation)
                    self.store.save(ended, self.replica)
                    log.info("evaluation %s %s", job.evaluation_id, ended.status.value)
                    self._dispatch()
            except SQLAlchemyError as error:
                log.warning("evaluation %s ended but the database is unreachable (%s); another start resumes it",
                            job.evaluation_id, type(error).__name__)

    def _ended(self, record: EvaluationRecord, status: Status, error: str | None,
               ran_every_simulation: bool) -> EvaluationRecord:
        """The record of an evaluation that ended, with what it produced."""
        self._on_end(record.evaluation_id)
        result = final_result(results_file(self.root / record.evaluation_id), ran_every_simulation)
        return record.ended(status, error, result)
