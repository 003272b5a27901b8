"""The scheduler alone: no process, no database server, no sleeping. Children are FakeChildren that exit
when told; time is a ManualClock that moves when told, and upkeep runs when a test calls tick()."""

from __future__ import annotations

from pathlib import Path

import pytest

from tau2_a2a.runner.outcome_file import RunStatus
from tau2_a2a.service.jobs.database import Database
from tau2_a2a.service.jobs.errors import EvaluationError
from tau2_a2a.service.jobs.evaluation import Status
from tau2_a2a.service.jobs.limits import Limits
from tau2_a2a.service.jobs.manager import EvaluationManager
from tau2_a2a.service.jobs.queue import FollowedTask
from tau2_a2a.service.jobs.scheduler import NOT_STARTED, TOKEN_LOST
from tests.service.jobs.conftest import Replicas, end
from tests.support.jobs import GENEROUS, KILLED, ManualClock, request


def test_evaluations_start_up_to_max_running_and_the_rest_wait_in_order(replicas: Replicas) -> None:
    manager, children = replicas.start(limits=Limits(max_running=2, max_queued=2))
    views = [manager.submit(request()) for _ in range(4)]
    ids = [view.evaluation_id for view in views]
    assert [view.status for view in views] == [Status.RUNNING] * 2 + [Status.QUEUED] * 2
    assert [manager.get(i).queue_position for i in ids[2:]] == [1, 2]
    assert children.running() == ids[:2]
    with pytest.raises(EvaluationError, match=r"^The evaluation queue is full \(2 waiting, 2 running\)\. Try again "
                                              r"when one finishes\.$"):
        manager.submit(request())

    end(manager, children.of(ids[1]), 0, status=RunStatus.COMPLETED, simulations=[])
    assert children.running() == [ids[0], ids[2]]  # the first in the queue took the free slot
    assert manager.get(ids[3]).queue_position == 1


def test_a_childs_exit_is_recorded_as_the_evaluations_end(replicas: Replicas) -> None:
    manager, children = replicas.start(limits=Limits(max_running=4))
    completed, failed, killed, incomplete = (manager.submit(request(tasks=2)).evaluation_id for _ in range(4))
    simulations = [{"task_id": "0", "trial": 0, "reward_info": {"reward": 1.0}, "termination_reason": "user_stop"},
                   {"task_id": "1", "trial": 0, "reward_info": {"reward": 0.0}, "termination_reason": "user_stop"}]
    end(manager, children.of(completed), 0, status=RunStatus.COMPLETED, simulations=simulations)
    end(manager, children.of(failed), 2)
    end(manager, children.of(killed), KILLED)
    end(manager, children.of(incomplete), 1, status=RunStatus.INCOMPLETE, simulations=simulations[:1])

    done = manager.get(completed).to_json()
    assert (done["status"], done["error"]) == ("completed", None)
    assert done["result"]["metrics"]["avg_reward"] == 0.5 and done["result"]["metrics"]["num_simulations"] == 2
    assert done["progress"] == {"simulations_done": 2, "simulations_total": 2, "avg_reward_so_far": 0.5}
    assert manager.get(failed).to_json()["error"] == (
        "the evaluation process exited with code 2 before its run could say how it ended.")
    assert manager.get(killed).to_json()["error"] == (
        "the evaluation process was killed by SIGKILL before its run ended.")
    partial = manager.get(incomplete).to_json()
    assert (partial["status"], partial["error"]) == (
        "failed", "the evaluation process exited with code 1: its run ended incomplete.")
    assert partial["result"]["metrics"]["num_simulations"] == 1  # what finished is kept
    assert {view.evaluation_id: view.status for view in manager.list()} == {
        completed: Status.COMPLETED, failed: Status.FAILED, killed: Status.FAILED, incomplete: Status.FAILED}


def test_canceling_a_queued_evaluation_takes_it_off_the_queue(replicas: Replicas) -> None:
    manager, children = replicas.start(limits=Limits(max_running=1))
    running, canceled, behind = (manager.submit(request()).evaluation_id for _ in range(3))
    view = manager.cancel(canceled)
    assert view.status == Status.CANCELED and view.record.result["metrics"]["num_simulations"] == 0  # type: ignore[index]
    assert manager.get(behind).queue_position == 1
    assert manager.cancel(canceled).status == Status.CANCELED  # ended ones are left as they are
    end(manager, children.of(running), 0, status=RunStatus.COMPLETED, simulations=[])
    assert children.running() == [behind]
    assert canceled not in {child.evaluation_id for child in children.started}  # it never ran


def test_canceling_a_running_evaluation_stops_its_child_and_the_next_starts(replicas: Replicas) -> None:
    manager, children = replicas.start(limits=Limits(max_running=1))
    running, behind = (manager.submit(request()).evaluation_id for _ in range(2))
    child = children.of(running)
    view = manager.cancel(running)  # waits for the child's end to be recorded
    assert (view.status, view.record.error, child.stops, child.code) == (Status.CANCELED, None, 1, KILLED)
    assert children.running() == [behind]


def test_a_child_that_cannot_start_fails_its_evaluation_and_the_queue_goes_on(replicas: Replicas) -> None:
    manager, children = replicas.start(limits=Limits(max_running=1))
    children.refuse = FileNotFoundError("/no/such/python")
    views = [manager.submit(request()) for _ in range(2)]
    for view in views:
        ended = manager.get(view.evaluation_id).to_json()
        assert (ended["status"], ended["error"]) == ("failed", NOT_STARTED.format(kind="FileNotFoundError"))
        assert "/no/such/python" not in str(ended)
    children.refuse = None
    assert manager.submit(request()).status == Status.RUNNING


def test_a_child_whose_start_failed_on_its_own_thread_fails_its_evaluation_the_same_way(replicas: Replicas) -> None:
    """A child waiting for the fork server starts on a thread of its own (warm.StartingProcess); when no process
    could start there, its evaluation ends as one whose start raised, not as a run that said nothing."""
    manager, children = replicas.start(limits=Limits(max_running=1))
    first, behind = (manager.submit(request()).evaluation_id for _ in range(2))
    child = children.of(first)
    child.not_started = "FileNotFoundError"
    end(manager, child, 70)  # what StartingProcess.wait answers for a process that never ran
    ended = manager.get(first)
    assert (ended.status, ended.record.error) == (Status.FAILED, NOT_STARTED.format(kind="FileNotFoundError"))
    assert children.running() == [behind]


def test_the_token_reaches_the_child_only_and_is_dropped_when_it_ends(replicas: Replicas) -> None:
    manager, children = replicas.start()
    evaluation_id = manager.submit(request(), token="s3cret-target-token").evaluation_id
    child = children.of(evaluation_id)
    job = manager.scheduler.supervisor.job(evaluation_id)
    assert child.token == "s3cret-target-token" and job is not None
    assert "s3cret" not in str(manager.store.all()) and manager.get(evaluation_id).record.agent_auth
    end(manager, child, 0, status=RunStatus.COMPLETED, simulations=[])
    assert job.token is None


def test_leases_are_renewed_while_the_replica_lives(replicas: Replicas, clock: ManualClock) -> None:
    alive, _ = replicas.start("alive", lease_seconds=30)
    other, others_children = replicas.start("other", lease_seconds=30)
    evaluation_id = alive.submit(request()).evaluation_id
    for _ in range(4):  # 80 s in all, more than a lease; each renewal lasts a lease from then
        clock.advance(20)
        other.scheduler.tick()  # 20 s after the last renewal (or the start)
        alive.scheduler.tick()
    assert others_children.started == []
    assert alive.get(evaluation_id).record.replica == "alive"


def test_a_dead_replicas_evaluation_is_resumed_by_another_once_its_lease_runs_out(
        replicas: Replicas, clock: ManualClock) -> None:
    dead, dead_children = replicas.start("dead", lease_seconds=30)
    alive, children = replicas.start("alive", lease_seconds=30)
    evaluation_id = dead.submit(request()).evaluation_id
    clock.advance(29)
    alive.scheduler.tick()
    assert children.started == []  # its lease still runs
    clock.advance(2)  # "dead" renewed nothing meanwhile
    alive.scheduler.tick()
    assert children.running() == [evaluation_id]
    resumed = alive.get(evaluation_id).to_json()
    assert (resumed["status"], resumed["replica"], resumed["resumed"]) == ("running", "alive", 1)

    stale = dead.scheduler.supervisor.job(evaluation_id)
    assert stale is not None
    dead.scheduler.tick()  # it wakes up: the evaluation is no longer its own, so it stops its child
    assert stale.done.wait(GENEROUS) and dead_children.of(evaluation_id).stops == 1
    job = alive.scheduler.supervisor.job(evaluation_id)
    assert job is not None and not job.canceling
    assert alive.get(evaluation_id).record.replica == "alive"  # the dead replica recorded nothing
    end(alive, children.of(evaluation_id), 0, status=RunStatus.COMPLETED, simulations=[])
    assert alive.get(evaluation_id).status == Status.COMPLETED


def test_a_dead_replicas_evaluation_that_needed_its_token_fails_saying_why(
        replicas: Replicas, clock: ManualClock) -> None:
    dead, _ = replicas.start("dead", limits=Limits(max_running=1), lease_seconds=30)
    alive, children = replicas.start("alive", lease_seconds=30)
    dead.submit(request())
    waiting = dead.submit(request(), token="s3cret").evaluation_id  # queued, held by "dead" for its token
    assert alive.get(waiting).status == Status.QUEUED
    clock.advance(31)
    alive.scheduler.tick()
    lost = alive.get(waiting).to_json()
    assert (lost["status"], lost["error"]) == ("failed", TOKEN_LOST)
    assert waiting not in children.running()


def test_a_replica_that_closes_hands_its_evaluations_over_at_once(replicas: Replicas) -> None:
    leaving, leaving_children = replicas.start("leaving")
    staying, children = replicas.start("staying")
    evaluation_id = leaving.submit(request()).evaluation_id
    leaving.close()
    assert leaving_children.of(evaluation_id).code == KILLED  # stopped, its simulations kept
    staying.scheduler.tick()  # no need to wait for the lease
    assert children.running() == [evaluation_id]
    assert staying.get(evaluation_id).record.resumed == 1


def test_a_service_that_restarts_resumes_what_it_left(replicas: Replicas) -> None:
    first, _ = replicas.start("a", limits=Limits(max_running=1))
    running, queued = (first.submit(request()).evaluation_id for _ in range(2))
    first.close()
    again, children = replicas.start("a", limits=Limits(max_running=1))
    assert children.running() == [running]
    assert (again.get(running).record.resumed, again.get(queued).queue_position) == (1, 1)


def test_a_cancel_asked_of_another_replica_reaches_the_one_that_runs_it(replicas: Replicas) -> None:
    runner, children = replicas.start("runner")
    front, _ = replicas.start("front")
    evaluation_id = runner.submit(request()).evaluation_id
    assert front.cancel(evaluation_id, wait=False).status == Status.RUNNING  # asked, through the table
    assert children.of(evaluation_id).stops == 0
    runner.scheduler.tick()
    assert runner.wait(evaluation_id, GENEROUS).status == Status.CANCELED
    assert children.of(evaluation_id).stops == 1


def test_followed_tasks_are_handed_over_when_their_follower_dies(replicas: Replicas, clock: ManualClock) -> None:
    dead, _ = replicas.start("dead", lease_seconds=30)
    alive, _ = replicas.start("alive", lease_seconds=30)
    followed, finished = (dead.submit(request()).evaluation_id for _ in range(2))
    dead.link_task(followed, "task-1", "context-1")
    dead.link_task(finished, "task-2", "context-2")
    dead.task_followed(finished)  # its final event was sent
    assert alive.evaluation_of_task("task-1") == followed
    clock.advance(31)
    alive.scheduler.tick()
    handed: list[FollowedTask] = []
    alive.follow_tasks_with(handed.append)  # nobody followed here yet: left to a replica that does
    assert handed == []
    alive.scheduler.tick()
    assert handed == [FollowedTask(followed, "task-1", "context-1")]
    clock.advance(20)
    alive.scheduler.tick()
    assert handed == [FollowedTask(followed, "task-1", "context-1")]  # handed over once: now renewed here


def test_followed_tasks_found_at_start_wait_for_their_follower(replicas: Replicas) -> None:
    first, _ = replicas.start("a")
    evaluation_id = first.submit(request()).evaluation_id
    first.link_task(evaluation_id, "task-1", "context-1")
    first.close()
    again, _ = replicas.start("a")
    handed: list[FollowedTask] = []
    again.follow_tasks_with(handed.append)
    assert handed == [FollowedTask(evaluation_id, "task-1", "context-1")]


def test_a_manager_never_started_closes_without_touching_its_database(tmp_path: Path) -> None:
    manager = EvaluationManager(tmp_path / "results", database=Database(f"sqlite:///{tmp_path / 'never.sqlite'}"))
    manager.close()  # an app built and never served closes its manager so
    assert not (tmp_path / "never.sqlite").exists()
