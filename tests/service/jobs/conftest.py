"""The job core's parts for its tests: the SQL store and queue (SQLite in tmp_path) and the in-memory ones,
the same tests run against each (`backend`), so the two cannot drift apart."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tau2_a2a.service.jobs.database import Database
from tau2_a2a.service.jobs.interfaces import JobQueue, RecordStore
from tau2_a2a.service.jobs.limits import DEFAULT_LIMITS, Limits
from tau2_a2a.service.jobs.manager import EvaluationManager
from tau2_a2a.service.jobs.memory import memory_store_and_queue
from tau2_a2a.service.jobs.queue import EvaluationQueue
from tau2_a2a.service.jobs.store import EvaluationStore
from tests.support.jobs import GENEROUS, FakeChild, FakeChildren, ManualClock


@dataclass
class Backend:
    """One table of evaluations, as a store and a queue, that any number of replicas share."""

    store: RecordStore
    queue: JobQueue


@pytest.fixture(params=["sqlite", "memory"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "memory":
        yield Backend(*memory_store_and_queue())
        return
    database = Database(f"sqlite:///{tmp_path / 'jobs.sqlite'}")
    database.open()
    yield Backend(EvaluationStore(database), EvaluationQueue(database))
    database.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


class Replicas:
    """Services on one backend and clock, each with its own children; closed at the test's end."""

    def __init__(self, backend: Backend, root: Path, clock: ManualClock) -> None:
        self.backend, self.root, self.clock = backend, root, clock
        self.started: list[EvaluationManager] = []

    def start(self, name: str = "a", limits: Limits = DEFAULT_LIMITS, lease_seconds: float = 30.0,
              children: FakeChildren | None = None) -> tuple[EvaluationManager, FakeChildren]:
        children = children or FakeChildren()
        manager = EvaluationManager(self.root, limits, children=children, replica=name, lease_seconds=lease_seconds,
                                    store=self.backend.store, queue=self.backend.queue, clock=self.clock).start()
        self.started.append(manager)
        return manager, children

    def close(self) -> None:
        for manager in self.started:
            manager.close()


@pytest.fixture
def replicas(backend: Backend, tmp_path: Path, clock: ManualClock) -> Iterator[Replicas]:
    made = Replicas(backend, tmp_path / "results", clock)
    yield made
    made.close()


def end(manager: EvaluationManager, child: FakeChild, code: int, **written: object) -> None:
    """Make `child` exit with `code` (see FakeChild.exit), and return once its end is recorded."""
    job = manager.scheduler.supervisor.job(child.evaluation_id)
    assert job is not None, f"{child.evaluation_id} runs in no job of {manager.replica}"
    child.exit(code, **written)  # type: ignore[arg-type]
    assert job.done.wait(GENEROUS), f"the end of {child.evaluation_id} was not recorded within {GENEROUS} s"
