"""The children of one replica's evaluations: started, watched until they exit, stopped.

Each running evaluation of this replica is a Job: its record, its directory,
the target's token (in memory only, dropped when the child ends) and its
child. A thread per job waits for the child's exit and reports it to
`on_exit`, the scheduler's; what the exit means is the scheduler's to record.
The supervisor also holds the fork server its children are forked from (warm.py): allowed from open(),
launched by the first evaluation that needs it, stopped at close().
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tau2_a2a.service.jobs.evaluation import EvaluationRecord
from tau2_a2a.service.jobs.interfaces import ChildProcess, ChildStarter

log = logging.getLogger("tau2_a2a.service")


@dataclass
class Job:
    """An evaluation whose child runs in this replica."""

    record: EvaluationRecord
    directory: Path
    token: str | None = field(default=None, repr=False)
    trace_parent: dict[str, str] | None = None  # with tracing on: the trace of the request that asked for it
    child: ChildProcess | None = None  # None once another replica took the evaluation over
    canceling: bool = False
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def evaluation_id(self) -> str:
        return self.record.evaluation_id


class Supervisor:
    """Starts each job's child with `options` (ChildOptions, or a test's starter), and calls
    `on_exit(job, exit code)` from the job's own thread when the child exits; `job.done` is set after that."""

    def __init__(self, options: ChildStarter, on_exit: Callable[[Job, int], None]) -> None:
        self.options = options
        self._on_exit = on_exit
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self.forkserver = options.forkserver()

    def open(self) -> None:
        """Allow the fork server: the first evaluation launches it and waits for it (warm.StartingProcess)."""
        if self.forkserver is not None:
            self.forkserver.start()

    def close(self) -> None:
        """Stop the fork server (after stop_all)."""
        if self.forkserver is not None:
            self.forkserver.close()

    def start(self, job: Job) -> None:
        job.child = self.options.start(job.record.request, job.directory, job.token, job.trace_parent,
                                       forkserver=self.forkserver)
        with self._lock:
            self._jobs[job.evaluation_id] = job
        threading.Thread(target=self._watch, args=(job,), daemon=True, name=f"watch {job.evaluation_id}").start()

    def job(self, evaluation_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(evaluation_id)

    def jobs(self) -> list[Job]:
        with self._lock:
            return list(self._jobs.values())

    def running(self) -> int:
        """Children of this replica still running."""
        return sum(1 for job in self.jobs() if not job.done.is_set())

    def forget(self, job: Job) -> None:
        """The job's child has exited and its end is recorded."""
        with self._lock:
            self._jobs.pop(job.evaluation_id, None)

    def stop(self, job: Job, taken_over: bool = False) -> None:
        """Stop the job's child in the background, keeping its finished simulations. `taken_over`: another
        replica owns the evaluation now, so this one records nothing of its end."""
        if job.canceling:
            return
        job.canceling = True
        child = job.child
        if taken_over:
            job.child = None
        log.info("evaluation %s: canceling", job.evaluation_id)
        if child is not None:
            threading.Thread(target=child.stop, daemon=True, name=f"cancel {job.evaluation_id}").start()

    def stop_all(self, timeout: float) -> None:
        """Stop every child (their finished simulations kept) and wait up to `timeout` seconds for each."""
        jobs = self.jobs()
        for job in jobs:
            if job.child is not None:
                job.child.stop()
        for job in jobs:
            job.done.wait(timeout)

    def _watch(self, job: Job) -> None:
        child = job.child
        assert child is not None
        code = child.wait()
        try:
            self._on_exit(job, code)
        finally:
            job.token = None
            job.done.set()
