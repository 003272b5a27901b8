"""Evaluation jobs: each one a child `tau2-a2a run` process, queued beyond a limit, kept in a database.

Why a child process per evaluation: tau2 keeps process-wide state (run_tasks
resets loguru's sinks, a shared rich console, an interactive resume prompt,
the in-memory credential store). In its own process every evaluation gets its
own, evaluations cannot see each other, and the service's logging is never
touched. The child is the same `tau2-a2a run` a person would type, so the
service and the CLI score alike.

- Progress: tau2 rewrites the results file after every simulation; it is read
  on demand.
- Cancel: the child is paused (SIGSTOP) at a moment when its results file is
  complete JSON and then killed, so every finished simulation is kept.
- Secrets: the target's bearer token reaches the child only through its
  environment (TAU2_A2A_AUTH_TOKEN), never its command line, and is dropped
  from memory when the child ends. Records on disk never hold it.
- Restarts and replicas: records and the queue live in one SQL database
  (store.py). A service that starts takes up the evaluations a stopped one
  left: a queued one waits again; a running one resumes, its child restarting
  on the same results file so tau2 redoes no finished simulation. Replicas on
  one PostgreSQL database share the queue; a replica's evaluations are held
  under a lease it renews, and another replica takes them over when it dies.
- Files: the service's directories are 0700 and its files 0600 (results,
  metrics, child.log, the SQLite database); each child runs with umask 077.
- Children die with their service (TAU2_A2A_EXIT_WITH, see runner/parent.py),
  so a resumed evaluation never has two writers.
- Priority: children run at a lower CPU priority than the service (`nice`,
  default 10 steps lower). Evaluations are batch work that can wait a moment;
  the service's answers (GetTask, get_evaluation) are what people wait on,
  and on a small machine eight evaluations would otherwise starve them. Each
  child runs in a session of its own (to stop it with its helpers), and Linux's
  autogroup scheduling shares the CPU fairly between sessions whatever their
  processes' nice values, so the child's session is lowered too
  (/proc/PID/autogroup). A child sharing the service's session instead would
  spend that session's share, and the service would wait for other sessions.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any, Callable

from sqlalchemy.exc import SQLAlchemyError

from tau2_a2a.runner.protocol_metrics import METRICS_SUFFIX
from tau2_a2a.client.targets import CLI_FLAG, SERVICE_FLAG
from tau2_a2a.client.config import AUTH_TOKEN_ENV, redact
from tau2_a2a.runner.parent import EXIT_WITH_ENV
from tau2_a2a.service import summary
from tau2_a2a.service.store import EvaluationStore, Row, default_database, replica_name

log = logging.getLogger("tau2_a2a.service")

SERVICE_ENV_PREFIX = "TAU2_EVAL_"
SERVICE_TOKEN_ENV = "TAU2_EVAL_AUTH_TOKEN"
RECORD_NAME = "evaluation.json"  # the file layout of earlier versions, imported once
RESULTS_NAME = "results"
CHILD_LOG = "child.log"
ID_PATTERN = re.compile(r"^ev-[0-9a-f]{12}$")
# `tau2-a2a run` exits 0 when every simulation ran cleanly, 3 when every simulation ran but some ended
# with A2A errors (they score 0; the metrics file says which), 2 when it could not go on.
EXIT_A2A_ERRORS = 3
CHILD_RAN_EVERY_SIMULATION = (0, EXIT_A2A_ERRORS)
DEFAULT_NICE = 10  # how much lower the CPU priority of an evaluation's process is than the service's
PRIVATE_DIR, PRIVATE_FILE, CHILD_UMASK = 0o700, 0o600, 0o077
# The child is `tau2-a2a run`: its advice names the CLI's flags; the service's caller has arguments instead.
_SERVICE_WORDING = (
    (re.compile(r" and re-run the same command to resume\."), " and send the evaluation again."),
    (re.compile(r"--a2a-auth-token(?: or \$?TAU2_A2A_AUTH_TOKEN)?"), "agent_auth_token"),
    (re.compile(re.escape(CLI_FLAG) + r"(?= )"), SERVICE_FLAG),  # the child names its flag; the operator sets ours
)


class Status(str, Enum):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"


TERMINAL = {Status.COMPLETED.value, Status.FAILED.value, Status.CANCELED.value}


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


@dataclass(frozen=True)
class EvaluationSpec:
    """A validated evaluation request. Holds no secret: it is stored and shown as is."""

    domain: str
    agent_endpoint: str
    total_simulations: int
    user: str = "user_simulator"
    user_llm: str = "gpt-4.1"
    user_llm_args: dict[str, Any] = field(default_factory=dict)
    num_trials: int = 1
    num_tasks: int | None = None
    task_ids: list[str] | None = None
    task_split: str | None = None
    max_steps: int = 200
    max_concurrency: int = 3
    shard_index: int | None = None  # an AgentBeats shard: task_ids then hold its part of the selection
    num_shards: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def command(self, results_dir: Path, python: str = sys.executable, ray_address: str | None = None,
                user_llm_api_base: str | None = None, allowed_targets: tuple[str, ...] = ()) -> list[str]:
        """The child's command line: `tau2-a2a run` as a person would type it, no secret.

        The service's target policy goes along (`--a2a-allowed-targets`): the child checks every
        connection it makes, to the card's interfaces too, when it makes it.

        Either way the child writes one results file, read for progress and kept on cancel:
        its simulations run in it, or on the Ray cluster at `ray_address` with it as the driver.
        `user_llm_api_base` is the operator's endpoint for the user LLM (never the caller's).
        """
        user_llm_args = {**self.user_llm_args, **({"api_base": user_llm_api_base} if user_llm_api_base else {})}
        command = [
            python, "-m", "tau2_a2a.cli", "run", self.domain,
            "--agent", "a2a_agent", "--a2a-endpoint", self.agent_endpoint,
            "--user", self.user, "--user-llm", self.user_llm,
            "--user-llm-args", json.dumps(user_llm_args),
            "--num-trials", str(self.num_trials), "--max-steps", str(self.max_steps),
            "--max-concurrency", str(self.max_concurrency),
            *(["--ray", ray_address] if ray_address else ["--a2a-workers", "1"]),
            "--results-dir", str(results_dir), "--save-to", RESULTS_NAME,
        ]
        if self.num_tasks is not None:
            command += ["--num-tasks", str(self.num_tasks)]
        if self.task_ids:
            command += ["--task-ids", *self.task_ids]
        if self.task_split:
            command += ["--task-split-name", self.task_split]
        if allowed_targets:
            command += [f"{CLI_FLAG}={','.join(allowed_targets)}"]
        return command



@dataclass
class _Job:
    """An evaluation whose child runs in this replica."""

    record: dict[str, Any]
    directory: Path
    token: str | None = field(default=None, repr=False)
    process: subprocess.Popen | None = None
    canceling: bool = False
    done: threading.Event = field(default_factory=threading.Event)


@dataclass
class _Progress:
    key: tuple[int, int]
    progress: dict[str, Any]


def _private_append(path: Path) -> Any:
    """`path` opened for appending, readable by the service's user only (made so if it exists)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE)
    os.fchmod(descriptor, PRIVATE_FILE)
    return os.fdopen(descriptor, "ab")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


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
        self._progress: dict[str, _Progress] = {}
        self._follow: Callable[[Row], None] | None = None
        self._orphaned_tasks: list[Row] = []
        self._closing = False
        self._stopped = threading.Event()
        self._import_files()
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
            record = {
                "evaluation_id": evaluation_id,
                "status": Status.QUEUED.value,
                "domain": spec.domain,
                "agent_endpoint": spec.agent_endpoint,
                "request": spec.as_dict(),
                "total_simulations": spec.total_simulations,
                "agent_auth": bool(token),
                "created_at": _now(),
                "started_at": None,
                "finished_at": None,
                "error": None,
                "result": None,
            }
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
        return self.root / self._row(evaluation_id).evaluation_id / f"{RESULTS_NAME}.json"

    def list(self) -> list[dict[str, Any]]:
        rows = self._read(self.store.all)
        return [self._snapshot(row) for row in sorted(
            rows, key=lambda r: (r.record["created_at"], r.evaluation_id))]

    def wait(self, evaluation_id: str, timeout: float | None = None) -> dict[str, Any]:
        """Block until the evaluation ends (or `timeout`); its snapshot."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            snapshot = self.get(evaluation_id)
            if snapshot["status"] in TERMINAL or (deadline is not None and time.monotonic() >= deadline):
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
            self._stop(job, job.process)
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
            record["progress"] = self._running_progress(row.evaluation_id, record["total_simulations"])
        elif record.get("result"):
            metrics = record["result"]["metrics"]
            record["progress"] = {
                "simulations_done": metrics["num_simulations"],
                "simulations_total": record["total_simulations"],
                "avg_reward_so_far": metrics["avg_reward"],
            }
        return record

    def _running_progress(self, evaluation_id: str, total: int) -> dict[str, Any]:
        path = self.root / evaluation_id / f"{RESULTS_NAME}.json"
        nothing_yet = summary.progress(None, total)
        try:
            stat = path.stat()
        except OSError:
            return nothing_yet
        key = (stat.st_mtime_ns, stat.st_size)
        cached = self._progress.get(evaluation_id)
        if cached and cached.key == key:
            return cached.progress
        results = summary.read_results(path)
        if results is None:  # being rewritten right now: keep the last reading
            return cached.progress if cached else nothing_yet
        progress = summary.progress(results, total)
        self._progress[evaluation_id] = _Progress(key, progress)
        return progress

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
                        if evaluation_id not in owned and job.process is not None:
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
        spec = job.record["request"]
        command = EvaluationSpec(**spec).command(job.directory, self.python, self.ray_address,
                                                 user_llm_api_base=self.user_llm_api_base,
                                                 allowed_targets=self.allowed_targets)
        # Nothing of the service's own settings (its token, its database URL) reaches the child.
        env = {k: v for k, v in os.environ.items() if k != AUTH_TOKEN_ENV and not k.startswith(SERVICE_ENV_PREFIX)}
        env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", NO_COLOR="1", TERM="dumb", COLUMNS="120")
        env[EXIT_WITH_ENV] = str(os.getpid())
        if job.token:
            env[AUTH_TOKEN_ENV] = job.token
        job.directory.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
        with _private_append(job.directory / CHILD_LOG) as child_log:
            job.process = subprocess.Popen(
                command, env=env, stdout=child_log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, cwd=job.directory, start_new_session=True, umask=CHILD_UMASK,
            )
        self._lower_priority(job.process.pid)
        job.record.update(status=Status.RUNNING.value, started_at=job.record.get("started_at") or _now(),
                          replica=self.replica)
        if resumed:
            job.record["resumed"] = job.record.get("resumed", 0) + 1
        self._jobs[evaluation_id] = job
        self.store.save(job.record, self.replica)
        log.info("evaluation %s %s (pid %d)", evaluation_id, "resumed" if resumed else "running",
                 job.process.pid)
        threading.Thread(target=self._watch, args=(job,), daemon=True, name=f"watch {evaluation_id}").start()

    def _lower_priority(self, pid: int) -> None:
        """Run the child `nice` steps below this process. Popen returns once the child has exec'd, before
        its interpreter starts any thread; the threads and processes it starts later inherit the value."""
        if not self.nice:
            return
        try:
            os.setpriority(os.PRIO_PROCESS, pid, min(19, os.getpriority(os.PRIO_PROCESS, 0) + self.nice))
        except OSError as error:  # the child already ended, or the platform refuses: it runs as it is
            log.debug("could not lower the priority of pid %d: %s", pid, error)
        autogroup = Path(f"/proc/{pid}/autogroup")  # Linux with autogroup scheduling: the child's session
        try:
            autogroup.write_text(str(self.nice))
        except OSError:  # no autogroup here (another OS, or the service runs in a cgroup): nice suffices
            pass

    def _watch(self, job: _Job) -> None:
        assert job.process is not None
        code = job.process.wait()
        with self._lock:
            self._jobs.pop(job.record["evaluation_id"], None)
            try:
                if not self._closing and job.process is not None:
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
            process, job.process = job.process, None
        else:
            process = job.process
        log.info("evaluation %s: canceling", job.record["evaluation_id"])
        threading.Thread(target=self._stop, args=(job, process), daemon=True,
                         name=f"cancel {job.record['evaluation_id']}").start()

    def _stop(self, job: _Job, process: subprocess.Popen | None) -> None:
        """Kill the child at a moment its results file is complete (or not yet written)."""
        if process is None:
            return
        path = job.directory / f"{RESULTS_NAME}.json"
        deadline = time.monotonic() + 10.0
        while process.poll() is None:
            try:
                process.send_signal(signal.SIGSTOP)
                consistent = not path.exists() or summary.read_results(path) is not None
                if consistent or time.monotonic() > deadline:
                    os.killpg(process.pid, signal.SIGKILL)
                    break
                process.send_signal(signal.SIGCONT)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        process.wait()

    def _finish(self, job: _Job, code: int | None) -> None:
        """Record how the evaluation ended and what it produced (caller holds the lock)."""
        results = summary.read_results(job.directory / f"{RESULTS_NAME}.json")
        if code in CHILD_RAN_EVERY_SIMULATION and results is not None:
            status, error = Status.COMPLETED.value, None
        elif job.canceling:
            status, error = Status.CANCELED.value, None
        else:
            status, error = Status.FAILED.value, self._child_error(job, code)
        self.store.save(self._ended(job.record, status, error, code), self.replica)
        log.info("evaluation %s %s", job.record["evaluation_id"], status)

    def _ended(self, record: dict[str, Any], status: str, error: str | None, code: int | None = None
               ) -> dict[str, Any]:
        """The record of an evaluation that ended, with what it produced."""
        results_path = self.root / record["evaluation_id"] / f"{RESULTS_NAME}.json"
        results = summary.read_results(results_path)
        self._progress.pop(record["evaluation_id"], None)
        return {**record, "status": status, "error": error, "finished_at": _now(),
                "result": summary.outcome(results, self._protocol_metrics(results_path, results, code))}

    def _protocol_metrics(self, results_path: Path, results: dict[str, Any] | None,
                          code: int | None) -> dict[str, Any] | None:
        """The protocol metrics report beside the results file (the child's, or rebuilt from them)."""
        if results is None or not results.get("simulations"):
            return None
        metrics_file = results_path.parent / f"{results_path.stem}{METRICS_SUFFIX}"
        if code in CHILD_RAN_EVERY_SIMULATION and metrics_file.exists():
            report = summary.read_results(metrics_file)
            if report is not None:
                return report
        try:  # a canceled or failed run: build the metrics file from what finished
            from tau2_a2a.runner.protocol_metrics import write_report

            report = write_report(results_path)
            metrics_file.chmod(PRIVATE_FILE)
            return report
        except Exception as error:  # noqa: BLE001 (a damaged results file must not lose the record)
            log.warning("evaluation %s: no protocol metrics (%s)", results_path.parent.name, error)
            return None

    def _child_error(self, job: _Job, code: int | None) -> str:
        """The child's own words for why it failed (its `error:` line or last exception)."""
        try:
            lines = (job.directory / CHILD_LOG).read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        lines = [line.strip() for line in lines if line.strip()]
        chosen = next((line[len("error: "):] for line in reversed(lines) if line.startswith("error: ")), None)
        if chosen is None:
            exceptions = [line for line in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception)\b", line)]
            chosen = exceptions[-1] if exceptions else (lines[-1] if lines else "no output")
        for pattern, wording in _SERVICE_WORDING:
            chosen = pattern.sub(wording, chosen)
        return redact(f"the evaluation process exited with code {code}: {chosen}"[:600], job.token)

    def _import_files(self) -> None:
        """Records of the earlier file layout (ev-*/evaluation.json), imported once."""
        known = self.store.ids()
        for path in sorted(self.root.glob(f"ev-*/{RECORD_NAME}")):
            try:
                record = json.loads(path.read_text())
                evaluation_id = record["evaluation_id"]
            except (OSError, ValueError, KeyError, TypeError) as error:
                log.warning("skipping unreadable evaluation record %s: %s", path, error)
                continue
            if evaluation_id not in known and ID_PATTERN.match(evaluation_id):
                active = record.get("status") not in TERMINAL
                # An unfinished one is owned by nobody alive: the take-over at start resumes it.
                self.store.insert(record, owner="imported" if active else None, lease_until=0.0 if active else None)
                log.info("imported evaluation record %s", path)
            path.rename(path.with_name(RECORD_NAME + ".imported"))
