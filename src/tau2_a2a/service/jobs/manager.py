"""The evaluations of one service: submitted, read, waited on, canceled; the way in for the tools.

Made without I/O. `start()` makes the results directory private, opens the
database (an injected Database; by default a SQLite file in the results
directory), imports the records of the earlier file layout, and starts the
scheduler, which takes up what a stopped service left. `close()` stops it.
The job core's parts (interfaces.py) can be given instead of the SQL ones:
a store and a queue (memory.py's share one table in memory, and then no
database is opened), a clock, a starter of children.
Progress is read on demand from each running evaluation's results file
(progress.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from tau2_a2a.service.jobs.child import ChildOptions
from tau2_a2a.service.jobs.database import Database, database_reachable, default_database
from tau2_a2a.service.jobs.directory import import_file_records, make_private, results_file
from tau2_a2a.service.jobs.errors import EvaluationNotFound
from tau2_a2a.service.jobs.evaluation import (
    ID_PATTERN,
    TERMINAL,
    EvaluationRecord,
    EvaluationView,
    Progress,
    Status,
    new_evaluation_id,
)
from tau2_a2a.service.jobs.interfaces import SYSTEM_CLOCK, ChildStarter, Clock, JobQueue, RecordStore
from tau2_a2a.service.jobs.limits import DEFAULT_LIMITS, Limits
from tau2_a2a.service.jobs.progress import ProgressReader
from tau2_a2a.service.jobs.queue import EvaluationQueue, FollowedTask, replica_name
from tau2_a2a.service.jobs.scheduler import Scheduler
from tau2_a2a.service.jobs.store import EvaluationStore
from tau2_a2a.service.request import EvaluationRequest


class EvaluationManager:
    """Evaluations under `root`, in `database`. `replica` names this service among the replicas of one
    database (default: this host and process); see Scheduler for `lease_seconds` and `clock`, ChildOptions for
    `children`. `store` and `queue`, given together, take the database's place (it is then never opened).
    """

    def __init__(self, root: Path | str, limits: Limits = DEFAULT_LIMITS, *, database: Database | None = None,
                 children: ChildStarter | None = None, replica: str | None = None,
                 lease_seconds: float = 30.0, store: RecordStore | None = None, queue: JobQueue | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        if (store is None) != (queue is None):
            raise ValueError("EvaluationManager takes a store and a queue together (they share one table).")
        self.root = Path(root).resolve()
        self.limits = limits
        self.children = children or ChildOptions()
        self.database = database or Database(default_database(self.root))
        self._uses_database = store is None
        self.store: RecordStore = store or EvaluationStore(self.database)
        self.queue: JobQueue = queue or EvaluationQueue(self.database)
        self.replica = replica or replica_name()
        self._progress = ProgressReader()
        self._started = False
        self.scheduler = Scheduler(self.root, self.store, self.queue, self.children, limits, self.replica,
                                   lease_seconds, on_end=self._progress.forget, clock=clock)

    def start(self) -> EvaluationManager:
        """Open the database and start the scheduler; StoreError when the database cannot be used."""
        self._started = True
        make_private(self.root)
        if self._uses_database:
            self.database.open()
        import_file_records(self.root, self.store)
        self.scheduler.start()
        return self

    def close(self) -> None:
        """Stop this replica (its children stopped, their results kept, their evaluations released); nothing to
        do for a manager never started (an app built and not served)."""
        if not self._started:
            return
        self.scheduler.close()
        if self._uses_database:
            self.database.close()

    @property
    def closing(self) -> bool:
        return self.scheduler.closing

    # -- requests ------------------------------------------------------------------------

    def submit(self, request: EvaluationRequest, token: str | None = None) -> EvaluationView:
        """Queue an evaluation and start it if a slot is free."""
        record = EvaluationRecord(evaluation_id=new_evaluation_id(), request=request, agent_auth=bool(token))
        self.scheduler.submit(record, token)
        return self.get(record.evaluation_id)

    def get(self, evaluation_id: str) -> EvaluationView:
        """Status, progress (queue position or simulations done) and results."""
        return self._view(self._record(evaluation_id))

    def list(self) -> list[EvaluationView]:
        """Every evaluation, oldest first."""
        with database_reachable():
            records = self.store.all()
        return [self._view(record) for record in sorted(records, key=lambda r: (r.created_at, r.evaluation_id))]

    def results_path(self, evaluation_id: str) -> Path:
        """tau2's results file of the evaluation (it may not exist yet)."""
        return results_file(self.root / self._record(evaluation_id).evaluation_id)

    def wait(self, evaluation_id: str, timeout: float | None = None) -> EvaluationView:
        """Block until the evaluation ends (or `timeout`). An evaluation of this replica has ended when its
        end is recorded and the queue has moved on (the next evaluation started)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            view = self.get(evaluation_id)
            if view.status in TERMINAL:
                self.scheduler.settle()
                return view
            if deadline is not None and time.monotonic() >= deadline:
                return view
            job = self.scheduler.supervisor.job(evaluation_id)
            pause = 0.2 if deadline is None else max(0.0, min(0.2, deadline - time.monotonic()))
            if job is not None:
                job.done.wait(pause)
            else:
                time.sleep(pause)

    def cancel(self, evaluation_id: str, wait: bool = True) -> EvaluationView:
        """Stop an evaluation wherever it runs; finished simulations are kept. Ended ones are left as they are."""
        record = self._record(evaluation_id)
        if record.status in TERMINAL:
            return self._view(record)
        self.scheduler.cancel(record)
        return self.wait(evaluation_id, 60) if wait else self.get(evaluation_id)

    def link_task(self, evaluation_id: str, task_id: str, context_id: str) -> None:
        self.scheduler.link_task(evaluation_id, task_id, context_id)

    def evaluation_of_task(self, task_id: str) -> str | None:
        """The evaluation the A2A task `task_id` reports, if any (whichever replica follows it)."""
        return self.queue.evaluation_of_task(task_id)

    def task_followed(self, evaluation_id: str) -> None:
        self.scheduler.task_followed(evaluation_id)

    def follow_tasks_with(self, follow: Callable[[FollowedTask], None]) -> None:
        self.scheduler.follow_tasks_with(follow)

    # -- reading ---------------------------------------------------------------------------

    def _record(self, evaluation_id: str) -> EvaluationRecord:
        if not isinstance(evaluation_id, str) or not ID_PATTERN.match(evaluation_id):
            raise EvaluationNotFound(
                f"evaluation_id {evaluation_id!r} is not an evaluation id: ids look like ev-0123456789ab "
                "(run_tau2_evaluation returns one; list_evaluations lists them)."
            )
        with database_reachable():
            record = self.store.get(evaluation_id)
        if record is None:
            raise EvaluationNotFound(
                f"No evaluation {evaluation_id} in this service. Use list_evaluations to see the known ones."
            )
        return record

    def _view(self, record: EvaluationRecord) -> EvaluationView:
        """The record as callers see it: with its queue position, or its progress."""
        evaluation_id, total = record.evaluation_id, record.total_simulations
        if record.status == Status.QUEUED:
            with database_reachable():
                position = self.queue.position(evaluation_id)
            return EvaluationView(record, queue_position=position or 1)
        if record.status == Status.RUNNING:
            path = results_file(self.root / evaluation_id)
            return EvaluationView(record, progress=self._progress.running(evaluation_id, path, total))
        if record.result:
            metrics = record.result["metrics"]
            return EvaluationView(record, progress=Progress(metrics["num_simulations"], total, metrics["avg_reward"]))
        return EvaluationView(record)
