"""Evaluation jobs: each one a child `tau2-a2a run` process, queued beyond a limit, persisted.

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
- Restart: one `evaluation.json` record per evaluation in its own directory;
  a new service reads them back. Evaluations that were queued or running when
  the service stopped are marked failed ("interrupted"), finished simulations
  kept.
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
from typing import Any

from tau2_a2a.client.metrics import METRICS_SUFFIX
from tau2_a2a.config import AUTH_TOKEN_ENV, redact
from tau2_a2a.service import summary

log = logging.getLogger("tau2_a2a.service")

SERVICE_TOKEN_ENV = "TAU2_EVAL_AUTH_TOKEN"
RECORD_NAME = "evaluation.json"
RESULTS_NAME = "results"
CHILD_LOG = "child.log"
ID_PATTERN = re.compile(r"^ev-[0-9a-f]{12}$")
# `tau2-a2a run` exits 0 when every simulation ran cleanly, 3 when every simulation ran but some ended
# with A2A errors (they score 0; the metrics file says which), 2 when it could not go on.
EXIT_A2A_ERRORS = 3
CHILD_RAN_EVERY_SIMULATION = (0, EXIT_A2A_ERRORS)


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

    def command(self, results_dir: Path, python: str = sys.executable, ray_address: str | None = None) -> list[str]:
        """The child's command line: `tau2-a2a run` as a person would type it, no secret.

        Either way the child writes one results file, read for progress and kept on cancel:
        its simulations run in it, or on the Ray cluster at `ray_address` with it as the driver.
        """
        command = [
            python, "-m", "tau2_a2a.cli", "run", self.domain,
            "--agent", "a2a_agent", "--a2a-endpoint", self.agent_endpoint,
            "--user", self.user, "--user-llm", self.user_llm,
            "--user-llm-args", json.dumps(self.user_llm_args),
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
        return command


@dataclass
class _Job:
    record: dict[str, Any]
    directory: Path
    token: str | None = field(default=None, repr=False)
    process: subprocess.Popen | None = None
    canceling: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    progress_cache: tuple[int, int, dict[str, Any]] | None = None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class EvaluationManager:
    """Starts, queues, follows, cancels and remembers evaluations under `root`."""

    def __init__(self, root: Path | str, limits: Limits = DEFAULT_LIMITS, python: str = sys.executable,
                 ray_address: str | None = None) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.limits = limits
        self.python = python
        self.ray_address = ray_address  # each evaluation's simulations run on this Ray cluster
        self._lock = threading.RLock()
        self._jobs: dict[str, _Job] = {}
        self._queue: list[str] = []
        self._closing = False
        self._load()

    # -- public --------------------------------------------------------------------

    def submit(self, spec: EvaluationSpec, token: str | None = None) -> dict[str, Any]:
        """Queue an evaluation and start it if a slot is free; its snapshot."""
        with self._lock:
            if self._closing:
                raise EvaluationError("The service is shutting down; send the request again later.")
            if len(self._queue) >= self.limits.max_queued:
                raise EvaluationError(
                    f"The evaluation queue is full ({self.limits.max_queued} waiting, "
                    f"{self.limits.max_running} running). Try again when one finishes."
                )
            evaluation_id = f"ev-{uuid.uuid4().hex[:12]}"
            directory = self.root / evaluation_id
            directory.mkdir(parents=True)
            job = _Job(
                record={
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
                },
                directory=directory,
                token=token or None,
            )
            self._jobs[evaluation_id] = job
            self._queue.append(evaluation_id)
            self._persist(job)
            log.info("evaluation %s queued: %s on %s, %d simulations", evaluation_id,
                     spec.agent_endpoint, spec.domain, spec.total_simulations)
            self._dispatch()
            return self._snapshot(job)

    def get(self, evaluation_id: str) -> dict[str, Any]:
        """Status, progress (queue position or simulations done) and results."""
        with self._lock:
            job = self._job(evaluation_id)
            snapshot = self._snapshot(job, progress=False)
        return self._with_progress(job, snapshot)  # reading the results file needs no lock

    def results_path(self, evaluation_id: str) -> Path:
        """tau2's results file of the evaluation (it may not exist yet)."""
        return self._job(evaluation_id).directory / f"{RESULTS_NAME}.json"

    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            jobs = sorted(self._jobs.values(), key=lambda j: (j.record["created_at"], j.record["evaluation_id"]))
            snapshots = [(job, self._snapshot(job, progress=False)) for job in jobs]
        return [self._with_progress(job, snapshot) for job, snapshot in snapshots]

    def wait(self, evaluation_id: str, timeout: float | None = None) -> dict[str, Any]:
        """Block until the evaluation ends (or `timeout`); its snapshot."""
        job = self._job(evaluation_id)
        job.done.wait(timeout)
        return self.get(evaluation_id)

    def cancel(self, evaluation_id: str, wait: bool = True) -> dict[str, Any]:
        """Stop an evaluation; finished simulations are kept. Ended ones are left as they are."""
        with self._lock:
            job = self._job(evaluation_id)
            status = job.record["status"]
            if status in TERMINAL or job.canceling:
                return self._snapshot(job)
            if status == Status.QUEUED.value:
                self._queue.remove(evaluation_id)
                job.canceling = True
                self._finish(job, None)
                return self._snapshot(job)
            job.canceling = True
            process = job.process
        log.info("evaluation %s: canceling", evaluation_id)
        stopper = threading.Thread(target=self._stop, args=(job, process), daemon=True,
                                   name=f"cancel {evaluation_id}")
        stopper.start()
        if wait:
            job.done.wait(60)
        return self.get(evaluation_id)

    def close(self) -> None:
        """Stop every running evaluation (their finished simulations are kept)."""
        with self._lock:
            self._closing = True
            running = [j for j in self._jobs.values() if j.process is not None and not j.done.is_set()]
            for evaluation_id in list(self._queue):
                self._queue.remove(evaluation_id)
                self._finish(self._jobs[evaluation_id], None)
        for job in running:
            self._stop(job, job.process)
            job.done.wait(30)

    # -- internals -----------------------------------------------------------------

    def _job(self, evaluation_id: str) -> _Job:
        if not isinstance(evaluation_id, str) or not ID_PATTERN.match(evaluation_id):
            raise EvaluationNotFound(
                f"evaluation_id {evaluation_id!r} is not an evaluation id: ids look like ev-0123456789ab "
                "(run_tau2_evaluation returns one; list_evaluations lists them)."
            )
        job = self._jobs.get(evaluation_id)
        if job is None:
            raise EvaluationNotFound(
                f"No evaluation {evaluation_id} in this service. Use list_evaluations to see the known ones."
            )
        return job

    def _snapshot(self, job: _Job, progress: bool = True) -> dict[str, Any]:
        """The record as callers see it (caller holds the lock)."""
        record = dict(job.record)
        status = record["status"]
        if status == Status.QUEUED.value:
            record["queue_position"] = self._queue.index(record["evaluation_id"]) + 1
        if status == Status.RUNNING.value:
            return self._with_progress(job, record) if progress else record
        if record.get("result"):
            metrics = record["result"]["metrics"]
            record["progress"] = {
                "simulations_done": metrics["num_simulations"],
                "simulations_total": record["total_simulations"],
                "avg_reward_so_far": metrics["avg_reward"],
            }
        return record

    def _with_progress(self, job: _Job, snapshot: dict[str, Any]) -> dict[str, Any]:
        if snapshot["status"] == Status.RUNNING.value:
            snapshot["progress"] = self._progress(job)
        return snapshot

    def _progress(self, job: _Job) -> dict[str, Any]:
        path = job.directory / f"{RESULTS_NAME}.json"
        nothing_yet = summary.progress(None, job.record["total_simulations"])
        try:
            stat = path.stat()
        except OSError:
            return nothing_yet
        key = (stat.st_mtime_ns, stat.st_size)
        if job.progress_cache and job.progress_cache[:2] == key:
            return job.progress_cache[2]
        results = summary.read_results(path)
        if results is None:  # being rewritten right now: keep the last reading
            return job.progress_cache[2] if job.progress_cache else nothing_yet
        progress = summary.progress(results, job.record["total_simulations"])
        job.progress_cache = (*key, progress)
        return progress

    def _dispatch(self) -> None:
        """Start queued evaluations while there are free slots (caller holds the lock)."""
        running = sum(1 for j in self._jobs.values() if j.record["status"] == Status.RUNNING.value)
        while self._queue and running < self.limits.max_running and not self._closing:
            job = self._jobs[self._queue.pop(0)]
            self._start(job)
            running += 1

    def _start(self, job: _Job) -> None:
        spec = job.record["request"]
        command = EvaluationSpec(**spec).command(job.directory, self.python, self.ray_address)
        env = {k: v for k, v in os.environ.items() if k not in (AUTH_TOKEN_ENV, SERVICE_TOKEN_ENV)}
        env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", NO_COLOR="1", TERM="dumb", COLUMNS="120")
        if job.token:
            env[AUTH_TOKEN_ENV] = job.token
        with open(job.directory / CHILD_LOG, "wb") as child_log:
            job.process = subprocess.Popen(
                command, env=env, stdout=child_log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, cwd=job.directory, start_new_session=True,
            )
        job.record.update(status=Status.RUNNING.value, started_at=_now())
        self._persist(job)
        log.info("evaluation %s running (pid %d)", job.record["evaluation_id"], job.process.pid)
        threading.Thread(target=self._watch, args=(job,), daemon=True,
                         name=f"watch {job.record['evaluation_id']}").start()

    def _watch(self, job: _Job) -> None:
        assert job.process is not None
        code = job.process.wait()
        with self._lock:
            self._finish(job, code)
            self._dispatch()

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
                    process.kill()
                    break
                process.send_signal(signal.SIGCONT)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        process.wait()

    def _finish(self, job: _Job, code: int | None) -> None:
        """Record how the evaluation ended and what it produced (caller holds the lock)."""
        results_path = job.directory / f"{RESULTS_NAME}.json"
        results = summary.read_results(results_path)
        if code in CHILD_RAN_EVERY_SIMULATION and results is not None:
            status, error = Status.COMPLETED.value, None
        elif job.canceling and not self._closing:
            status, error = Status.CANCELED.value, None
        elif self._closing:
            status, error = Status.FAILED.value, "interrupted: the service stopped while this evaluation ran"
        else:
            status, error = Status.FAILED.value, self._child_error(job, code)
        job.record.update(
            status=status,
            error=error,
            finished_at=_now(),
            result=summary.outcome(results, self._protocol_metrics(results_path, results, code)),
        )
        job.token = None
        job.process = None
        self._persist(job)
        job.done.set()
        log.info("evaluation %s %s", job.record["evaluation_id"], status)

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
            from tau2_a2a.client.metrics import write_report

            return write_report(results_path)
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
        return redact(f"the evaluation process exited with code {code}: {chosen}"[:600], job.token)

    def _persist(self, job: _Job) -> None:
        path = job.directory / RECORD_NAME
        temporary = path.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(job.record, indent=2))
        temporary.replace(path)

    def _load(self) -> None:
        """Read back the records of earlier runs of the service."""
        for path in sorted(self.root.glob(f"ev-*/{RECORD_NAME}")):
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError) as error:
                log.warning("skipping unreadable evaluation record %s: %s", path, error)
                continue
            job = _Job(record=record, directory=path.parent)
            if record.get("status") not in TERMINAL:
                was = record.get("status")
                results_path = path.parent / f"{RESULTS_NAME}.json"
                results = summary.read_results(results_path)
                record.update(
                    status=Status.FAILED.value,
                    error=f"interrupted: the service stopped while this evaluation was {was}",
                    finished_at=record.get("finished_at") or _now(),
                    result=summary.outcome(results, self._protocol_metrics(results_path, results, None)),
                )
                self._persist(job)
            job.done.set()
            self._jobs[record["evaluation_id"]] = job
