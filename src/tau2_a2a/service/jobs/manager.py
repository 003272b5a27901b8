"""Evaluation jobs: queued beyond a limit, each run by a child process (child.py), kept in a database.

- Restarts and replicas: records and the queue live in one SQL database
  (store.py). A service that starts takes up the evaluations a stopped one
  left: a queued one waits again; a running one resumes, its child restarting
  on the same results file so tau2 redoes no finished simulation. Replicas on
  one PostgreSQL database share the queue; a replica's evaluations are held
  under a lease it renews, and another replica takes them over when it dies.
- Secrets: the target's bearer token is held in memory only, handed to the
  child (child.py) and dropped when the child ends. Records never hold it.
- Cancel: a child of this replica is stopped keeping every finished
  simulation (child.py); one of another replica is asked to stop through the
  database.
- Progress: read on demand from the results file (progress.py).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from sqlalchemy.exc import SQLAlchemyError

from tau2_a2a.service import summary
from tau2_a2a.service.child import DEFAULT_NICE, ChildRun, ran_every_simulation
from tau2_a2a.service.progress import ProgressReader, final_result
from tau2_a2a.service.records import (
    ID_PATTERN,
    PRIVATE_DIR,
    TERMINAL,
    Status,
    import_file_records,
    new_record,
    now,
    results_file,
)
from tau2_a2a.service.spec import EvaluationSpec
from tau2_a2a.service.store import EvaluationStore, Row, default_database, replica_name

log = logging.getLogger("tau2_a2a.service")


class EvaluationError(ValueError):
    """A request the manager cannot accept; the message says why and what to do."""


class EvaluationNotFound(EvaluationError):
    pass


@dataclass(frozen=True)
class Limits:
    """What one service accepts; every limit is a CLI flag of `tau2-a2a serve`."""

    max_running: int = 2  # evaluations at once; the rest wait in a queue
    max_queued: int = 16
    max_simulations: int = 200  # tasks x trials per request
    max_concurrency: int = 8  # simulations at once within one evaluation

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value < 1:
                raise EvaluationError(f"Service limit {name} must be at least 1, got {value}.")


DEFAULT_LIMITS = Limits()


@dataclass
class _Job:
    """An evaluation whose child runs in this replica."""

    record: dict[str, Any]
    directory: Path
    token: str | None = field(default=None, repr=False)
    child: ChildRun | None = None
    canceling: bool = False
    done: threading.Event = field(default_factory=threading.Event)


TOKEN_LOST = ("the target's bearer token was held only in the memory of the service process that stopped "
              "(it is never stored); finished simulations are kept. Submit the evaluation again with "
              "agent_auth_token.")


class EvaluationManager:
    """Starts, queues, follows, cancels and remembers evaluations under `root`, in one database.

    `database` is a SQLite file or a postgresql:// URL (default: a SQLite file
    in `root`). `replica` names this service among the replicas of one
    database; `lease_seconds` is how long a replica that stopped answering
    keeps its evaluations before another takes them over. `nice` lowers the
    CPU priority of the evaluations' processes by that many steps (0 to 19).
    """

    def __init__(self, root: Path | str, limits: Limits = DEFAULT_LIMITS, python: str = sys.executable,
                 ray_address: str | None = None, database: str | None = None, replica: str | None = None,
                 lease_seconds: float = 30.0, nice: int = DEFAULT_NICE,
                 user_llm_api_base: str | None = None, allowed_targets: tuple[str, ...] = ()) -> None:
        if not 0 <= nice <= 19:
            raise EvaluationError(f"Evaluations run 0 to 19 nice steps below the service, got {nice}: set "
                                  "--evaluation-nice or TAU2_EVAL_EVALUATION_NICE within that range.")
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
        try:  # results and the database are the service's business, nobody else's
            self.root.chmod(PRIVATE_DIR)
        except OSError as error:  # a directory another user owns (a shared mount): its owner decides
            log.warning("results directory %s keeps its mode (%s)", self.root, error.strerror)
        self.user_llm_api_base = user_llm_api_base
        self.limits = limits
        self.python = python
        self.ray_address = ray_address  # each evaluation's simulations run on this Ray cluster
        self.allowed_targets = tuple(allowed_targets)  # the service's target policy, enforced in each child too
        self.store = EvaluationStore(database or default_database(self.root))
        self.replica = replica or replica_name()
        self.lease_seconds = lease_seconds
        self.nice = nice
        self._tick = max(0.2, min(2.0, lease_seconds / 10))
        self._lock = threading.RLock()
        self._jobs: dict[str, _Job] = {}
        self._tokens: dict[str, str] = {}  # of queued evaluations received here; never stored
        self._progress = ProgressReader()
        self._follow: Callable[[Row], None] | None = None
        self._orphaned_tasks: list[Row] = []
        self._closing = False
        self._stopped = threading.Event()
        import_file_records(self.root, self.store)
        with self._lock:
            self._adopt_expired(at_start=True)
            self._dispatch()
        self._maintainer = threading.Thread(target=self._maintain, daemon=True, name="evaluations")
        self._maintainer.start()

    # -- public --------------------------------------------------------------------

    def submit(self, spec: EvaluationSpec, token: str | None = None) -> dict[str, Any]:
        """Queue an evaluation and start it if a slot is free; its snapshot."""
        with self._lock:
            if self._closing:
                raise EvaluationError("The service is shutting down; send the request again later.")
            queued = self._read(self.store.queued_count)
            if queued >= self.limits.max_queued:
                raise EvaluationError(
                    f"The evaluation queue is full ({self.limits.max_queued} waiting, "
                    f"{self.limits.max_running} running). Try again when one finishes."
                )
            evaluation_id = f"ev-{uuid.uuid4().hex[:12]}"
            (self.root / evaluation_id).mkdir(mode=PRIVATE_DIR)
            record = new_record(evaluation_id, spec, agent_auth=bool(token))
            # A queued evaluation that needs a token waits for this replica, the only one holding it.
            self._write(lambda: self.store.insert(record, owner=self.replica if token else None,
                                                  lease_until=self._lease() if token else None))
            if token:
                self._tokens[evaluation_id] = token
            log.info("evaluation %s queued: %s on %s, %d simulations", evaluation_id,
                     spec.agent_endpoint, spec.domain, spec.total_simulations)
            self._dispatch()
        return self.get(evaluation_id)

    def get(self, evaluation_id: str) -> dict[str, Any]:
        """Status, progress (queue position or simulations done) and results."""
        return self._snapshot(self._row(evaluation_id))

    def results_path(self, evaluation_id: str) -> Path:
        """tau2's results file of the evaluation (it may not exist yet)."""
        return results_file(self.root / self._row(evaluation_id).evaluation_id)

    def list(self) -> list[dict[str, Any]]:
        rows = self._read(self.store.all)
        return [self._snapshot(row) for row in sorted(
            rows, key=lambda r: (r.record["created_at"], r.evaluation_id))]

    def wait(self, evaluation_id: str, timeout: float | None = None) -> dict[str, Any]:
        """Block until the evaluation ends (or `timeout`); its snapshot. An evaluation of this replica has
        ended when its end is recorded and the queue has moved on (the next evaluation started)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            snapshot = self.get(evaluation_id)
            if snapshot["status"] in TERMINAL:
                with self._lock:  # its watcher records the end and starts the next one under this lock
                    pass
                return snapshot
            if deadline is not None and time.monotonic() >= deadline:
                return snapshot
            job = self._jobs.get(evaluation_id)
            pause = 0.2 if deadline is None else max(0.0, min(0.2, deadline - time.monotonic()))
            if job is not None:
                job.done.wait(pause)
            else:
                time.sleep(pause)

    def cancel(self, evaluation_id: str, wait: bool = True) -> dict[str, Any]:
        """Stop an evaluation wherever it runs; finished simulations are kept. Ended ones are left as they are."""
        row = self._row(evaluation_id)
        if row.record["status"] in TERMINAL:
            return self._snapshot(row)
        with self._lock:
            job = self._jobs.get(evaluation_id)
            if job is not None:
                self._cancel_local(job)
            elif self._write(lambda: self.store.cancel_queued(evaluation_id)):
                self._tokens.pop(evaluation_id, None)
                self._write(lambda: self.store.save(self._ended(row.record, Status.CANCELED.value, None), None))
                log.info("evaluation %s canceled while queued", evaluation_id)
            else:  # running in another replica: it sees the request within a second
                self._write(lambda: self.store.request_cancel(evaluation_id))
        return self.wait(evaluation_id, 60) if wait else self.get(evaluation_id)

    @property
    def closing(self) -> bool:
        return self._closing

    def link_task(self, evaluation_id: str, task_id: str, context_id: str) -> None:
        """The A2A task that follows this evaluation, so that a replica can continue it after a restart."""
        self._write(lambda: self.store.link_task(evaluation_id, task_id, context_id, self.replica,
                                                 self._lease()))

    def task_followed(self, evaluation_id: str) -> None:
        """The A2A task has its final event: nobody needs to continue it."""
        self._write(lambda: self.store.unlink_task(evaluation_id))

    def follow_tasks_with(self, follow: Callable[[Row], None]) -> None:
        """Continue A2A tasks whose follower died with `follow(row)`; from now on this replica takes them up."""
        with self._lock:
            self._follow = follow
            orphaned, self._orphaned_tasks = self._orphaned_tasks, []
        for row in orphaned:
            follow(row)

    def close(self) -> None:
        """Stop this replica: children are stopped with their results kept, and their evaluations released.

        The next service on this database (or another replica at once) resumes them.
        """
        with self._lock:
            if self._closing:
                return
            self._closing = True
            jobs = list(self._jobs.values())
        self._stopped.set()
        self._maintainer.join(10)
        for job in jobs:
            if job.child is not None:
                job.child.stop()
            job.done.wait(30)
        try:
            self.store.release(self.replica)
        except SQLAlchemyError as error:
            log.warning("could not release this replica's evaluations (%s); they are taken over when their "
                        "lease runs out", type(error).__name__)
        self.store.close()

    # -- reading -------------------------------------------------------------------

    def _row(self, evaluation_id: str) -> Row:
        if not isinstance(evaluation_id, str) or not ID_PATTERN.match(evaluation_id):
            raise EvaluationNotFound(
                f"evaluation_id {evaluation_id!r} is not an evaluation id: ids look like ev-0123456789ab "
                "(run_tau2_evaluation returns one; list_evaluations lists them)."
            )
        row = self._read(lambda: self.store.get(evaluation_id))
        if row is None:
            raise EvaluationNotFound(
                f"No evaluation {evaluation_id} in this service. Use list_evaluations to see the known ones."
            )
        return row

    def _snapshot(self, row: Row) -> dict[str, Any]:
        """The record as callers see it: with its queue position, or its progress."""
        record = dict(row.record)
        status = record["status"]
        if status == Status.QUEUED.value:
            record["queue_position"] = self._read(lambda: self.store.queue_position(row.evaluation_id)) or 1
        elif status == Status.RUNNING.value:
            record["progress"] = self._progress.running(row.evaluation_id, results_file(self.root / row.evaluation_id),
                                                       record["total_simulations"])
        elif record.get("result"):
            metrics = record["result"]["metrics"]
            record["progress"] = {
                "simulations_done": metrics["num_simulations"],
                "simulations_total": record["total_simulations"],
                "avg_reward_so_far": metrics["avg_reward"],
            }
        return record

    def _read(self, query: Callable[[], Any]) -> Any:
        """A database read; an unreachable database is an EvaluationError saying so."""
        try:
            return query()
        except SQLAlchemyError as error:
            raise EvaluationError(f"The service's database is unreachable ({type(error).__name__}); "
                                  "try again in a moment.") from None

    _write = _read

    def _lease(self) -> float:
        return time.time() + self.lease_seconds

    # -- running -------------------------------------------------------------------

    def _maintain(self) -> None:
        """Renew leases, pass on cancel requests, take over what dead replicas left, start queued work."""
        while not self._stopped.wait(self._tick):
            try:
                with self._lock:
                    if self._closing:
                        return
                    owned = self.store.renew(self.replica, self._lease())
                    for evaluation_id, job in list(self._jobs.items()):
                        if evaluation_id not in owned and job.child is not None:
                            log.warning("evaluation %s: taken over by another replica; stopping here",
                                        evaluation_id)
                            self._cancel_local(job, finish=False)
                    for evaluation_id in self.store.cancel_requests(self.replica):
                        if evaluation_id in self._jobs:
                            self._cancel_local(self._jobs[evaluation_id])
                    self._adopt_expired()
                    self._dispatch()
            except SQLAlchemyError as error:
                log.warning("database unreachable (%s); evaluations keep running, retrying",
                            type(error).__name__)

    def _adopt_expired(self, at_start: bool = False) -> None:
        """Take over what a stopped replica left (caller holds the lock)."""
        for row in self.store.claim_expired(self.replica, self._lease(), time.time(), at_start=at_start):
            record, evaluation_id = row.record, row.evaluation_id
            if record.get("agent_auth") and evaluation_id not in self._tokens and evaluation_id not in self._jobs:
                log.info("evaluation %s: its target's token is gone with the replica that held it", evaluation_id)
                self.store.save(self._ended(record, Status.FAILED.value, TOKEN_LOST), self.replica)
            elif record["status"] == Status.QUEUED.value:
                if not record.get("agent_auth"):  # back to the shared queue; one needing our token stays ours
                    self.store.requeue(evaluation_id, self.replica)
            elif evaluation_id not in self._jobs:
                log.info("evaluation %s: resuming what another service process left", evaluation_id)
                self._start(_Job(record=record, directory=self.root / evaluation_id,
                                 token=self._tokens.pop(evaluation_id, None)), resumed=True)
        for row in self.store.claim_orphaned_tasks(self.replica, self._lease(), time.time(), at_start=at_start,
                                                    claim=self._follow is not None or at_start):
            if self._follow is None:
                self._orphaned_tasks.append(row)
            else:
                self._follow(row)

    def _dispatch(self) -> None:
        """Start queued evaluations while this replica has free slots (caller holds the lock)."""
        while not self._closing and sum(1 for j in self._jobs.values() if not j.done.is_set()) \
                < self.limits.max_running:
            row = self.store.claim_queued(self.replica, self._lease())
            if row is None:
                return
            self._start(_Job(record=row.record, directory=self.root / row.evaluation_id,
                             token=self._tokens.pop(row.evaluation_id, None)))

    def _start(self, job: _Job, resumed: bool = False) -> None:
        """Run the evaluation's child (caller holds the lock and owns the row)."""
        evaluation_id = job.record["evaluation_id"]
        job.child = ChildRun.start(EvaluationSpec(**job.record["request"]), job.directory, job.token, nice=self.nice,
                                   python=self.python, ray_address=self.ray_address,
                                   user_llm_api_base=self.user_llm_api_base, allowed_targets=self.allowed_targets)
        job.record.update(status=Status.RUNNING.value, started_at=job.record.get("started_at") or now(),
                          replica=self.replica)
        if resumed:
            job.record["resumed"] = job.record.get("resumed", 0) + 1
        self._jobs[evaluation_id] = job
        self.store.save(job.record, self.replica)
        log.info("evaluation %s %s (pid %d)", evaluation_id, "resumed" if resumed else "running", job.child.pid)
        threading.Thread(target=self._watch, args=(job,), daemon=True, name=f"watch {evaluation_id}").start()

    def _watch(self, job: _Job) -> None:
        assert job.child is not None
        code = job.child.wait()
        with self._lock:
            self._jobs.pop(job.record["evaluation_id"], None)
            try:
                if not self._closing and job.child is not None:
                    self._finish(job, code)
                    self._dispatch()
            except SQLAlchemyError as error:
                log.warning("evaluation %s ended but the database is unreachable (%s); another start resumes it",
                            job.record["evaluation_id"], type(error).__name__)
            finally:
                job.token = None
                job.done.set()

    def _cancel_local(self, job: _Job, finish: bool = True) -> None:
        """Stop a child of this replica in the background (caller holds the lock)."""
        if job.canceling:
            return
        job.canceling = True
        if not finish:  # another replica owns the evaluation now: leave its record alone
            child, job.child = job.child, None
        else:
            child = job.child
        log.info("evaluation %s: canceling", job.record["evaluation_id"])
        if child is not None:
            threading.Thread(target=child.stop, daemon=True, name=f"cancel {job.record['evaluation_id']}").start()

    def _finish(self, job: _Job, code: int | None) -> None:
        """Record how the evaluation ended and what it produced (caller holds the lock)."""
        assert job.child is not None
        if ran_every_simulation(code) and summary.read_results(results_file(job.directory)) is not None:
            status, error = Status.COMPLETED.value, None
        elif job.canceling:
            status, error = Status.CANCELED.value, None
        else:
            status, error = Status.FAILED.value, job.child.failure(code, job.token)
        self.store.save(self._ended(job.record, status, error, code), self.replica)
        log.info("evaluation %s %s", job.record["evaluation_id"], status)

    def _ended(self, record: dict[str, Any], status: str, error: str | None, code: int | None = None
               ) -> dict[str, Any]:
        """The record of an evaluation that ended, with what it produced."""
        self._progress.forget(record["evaluation_id"])
        finished_at = now()
        result = final_result(results_file(self.root / record["evaluation_id"]), ran_every_simulation(code))
        return {**record, "status": status, "error": error, "finished_at": finished_at, "result": result}
