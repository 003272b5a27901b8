"""The supervisor alone: children started, watched until they exit, stopped; no process."""

from __future__ import annotations

import threading
from pathlib import Path

from tau2_a2a.service.jobs.supervisor import Job, Supervisor
from tests.support.jobs import GENEROUS, KILLED, FakeChildren, record


class Exits:
    """The supervisor's on_exit: each (evaluation id, exit code, the thread it was told on)."""

    def __init__(self) -> None:
        self.told: list[tuple[str, int, str]] = []

    def __call__(self, job: Job, code: int) -> None:
        assert not job.done.is_set() and job.token is not None  # told before the job is done and forgotten
        self.told.append((job.evaluation_id, code, threading.current_thread().name))


def job_in(tmp_path: Path, token: str = "s3cret") -> Job:
    made = record()
    return Job(record=made, directory=tmp_path / made.evaluation_id, token=token, trace_parent={"traceparent": "t"})


def test_a_childs_exit_is_told_from_its_own_thread_and_its_token_dropped(tmp_path: Path) -> None:
    children, exits = FakeChildren(), Exits()
    supervisor = Supervisor(children, exits)
    first, second = job_in(tmp_path), job_in(tmp_path)
    for job in (first, second):
        supervisor.start(job)
    assert supervisor.running() == 2 and supervisor.job(first.evaluation_id) is first
    started = children.of(first.evaluation_id)
    assert (started.token, started.trace_parent, started.directory) == ("s3cret", {"traceparent": "t"},
                                                                       first.directory)
    children.of(second.evaluation_id).exit(3)
    assert second.done.wait(GENEROUS)
    assert exits.told == [(second.evaluation_id, 3, f"watch {second.evaluation_id}")]
    assert second.token is None and supervisor.running() == 1
    supervisor.forget(second)
    assert [job.evaluation_id for job in supervisor.jobs()] == [first.evaluation_id]


def test_a_stop_is_passed_on_once_and_a_taken_over_job_lets_go_of_its_child(tmp_path: Path) -> None:
    children, exits = FakeChildren(), Exits()
    supervisor = Supervisor(children, exits)
    canceled, taken = job_in(tmp_path), job_in(tmp_path)
    for job in (canceled, taken):
        supervisor.start(job)
    supervisor.stop(canceled)
    supervisor.stop(canceled)
    assert canceled.done.wait(GENEROUS) and canceled.canceling
    assert children.of(canceled.evaluation_id).stops == 1 and exits.told[0][:2] == (canceled.evaluation_id, KILLED)

    supervisor.stop(taken, taken_over=True)
    assert taken.child is None  # what it records of its end is nothing: another replica owns it now
    assert taken.done.wait(GENEROUS) and children.of(taken.evaluation_id).code == KILLED


def test_stop_all_stops_every_child_and_waits_for_each(tmp_path: Path) -> None:
    children, exits = FakeChildren(), Exits()
    supervisor = Supervisor(children, exits)
    jobs = [job_in(tmp_path) for _ in range(3)]
    for job in jobs:
        supervisor.start(job)
    supervisor.stop_all(timeout=GENEROUS)
    assert all(job.done.is_set() for job in jobs) and supervisor.running() == 0
    assert sorted(code for _, code, _ in exits.told) == [KILLED] * 3

