"""The job core's parts for tests that run no process: a clock moved by hand, children that exit when told.

ManualClock: time moves only by `advance`, and the scheduler's upkeep never runs
by itself (its thread waits until the scheduler closes): a test calls `tick()`.
FakeChildren: the supervisor's starter (service/jobs/interfaces.py, ChildStarter);
each start is a FakeChild, which exits when the test says so, with a run's
outcome and results file written first if given, as a real child writes them.
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tau2_a2a.runner.outcome_file import RunEnd, RunStatus, write_outcome
from tau2_a2a.service.jobs.directory import outcome_file, results_file
from tau2_a2a.service.jobs.evaluation import EvaluationRecord, new_evaluation_id
from tau2_a2a.service.jobs.warm import ForkServer
from tau2_a2a.service.request import EvaluationRequest

GENEROUS = 60.0  # seconds a test waits on another thread (the machine may be very busy)
KILLED = -9  # the exit code of a child stopped with SIGKILL, as ChildRun.stop does


def request(tasks: int = 1) -> EvaluationRequest:
    """A checked request of `tasks` tasks with the scripted user (checked by hand: no tau2 imported)."""
    return EvaluationRequest(domain="airline", agent_endpoint="http://127.0.0.1:9", user="scripted_user",
                             task_ids=[str(i) for i in range(tasks)], total_simulations=tasks)


def record(tasks: int = 1, agent_auth: bool = False) -> EvaluationRecord:
    return EvaluationRecord(evaluation_id=new_evaluation_id(), request=request(tasks), agent_auth=agent_auth)


class ManualClock:
    """Epoch seconds that move only when told."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def wait(self, stopped: threading.Event, seconds: float) -> bool:
        return stopped.wait()  # no upkeep by itself: the test ticks


@dataclass
class FakeChild:
    """One started child: what it was given, and its exit when the test says so."""

    pid: int
    request: EvaluationRequest
    directory: Path
    token: str | None = field(repr=False)
    trace_parent: dict[str, str] | None
    code: int | None = None
    stops: int = 0
    not_started: str | None = None  # as a child whose start failed on its own thread says why
    _exited: threading.Event = field(default_factory=threading.Event)

    @property
    def evaluation_id(self) -> str:
        return self.directory.name

    def exit(self, code: int, status: RunStatus | None = None, simulations: list[dict[str, Any]] | None = None) -> None:
        """Exit with `code`, having written the run's outcome (`status`) and results (`simulations`) if given."""
        if simulations is not None:
            results_file(self.directory).parent.mkdir(parents=True, exist_ok=True)
            results_file(self.directory).write_text(json.dumps({"simulations": simulations}))
        if status is not None:
            write_outcome(outcome_file(self.directory), RunEnd(status, code, simulations=len(simulations or [])))
        self.code = code
        self._exited.set()

    def wait(self) -> int:
        self._exited.wait()
        assert self.code is not None
        return self.code

    def stop(self) -> None:
        """Killed as ChildRun.stop kills: SIGKILL, its results (if any) kept."""
        self.stops += 1
        if not self._exited.is_set():
            self.exit(KILLED)

    @property
    def exited(self) -> bool:
        return self._exited.is_set()


class FakeChildren:
    """Starts FakeChild children; `refuse` makes the next starts raise it (a child that cannot start)."""

    def __init__(self) -> None:
        self.started: list[FakeChild] = []
        self.refuse: Exception | None = None
        self._pids = itertools.count(40_000)
        self._changed = threading.Condition()

    def start(self, request: EvaluationRequest, directory: Path, token: str | None,
              trace_parent: dict[str, str] | None = None, forkserver: ForkServer | None = None) -> FakeChild:
        if self.refuse is not None:
            raise self.refuse
        child = FakeChild(next(self._pids), request, directory, token, trace_parent)
        with self._changed:
            self.started.append(child)
            self._changed.notify_all()
        return child

    def forkserver(self) -> ForkServer | None:
        return None

    def of(self, evaluation_id: str) -> FakeChild:
        """The latest child started for the evaluation."""
        return [child for child in self.started if child.evaluation_id == evaluation_id][-1]

    def running(self) -> list[str]:
        """The evaluations whose latest child has not exited, in the order they started."""
        latest = {child.evaluation_id: child for child in self.started}
        return [evaluation_id for evaluation_id, child in latest.items() if not child.exited]
