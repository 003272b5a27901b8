"""The manager with real children (stand-ins that sleep): the queue, a child that cannot start, priority."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tau2_a2a.client.targets import TargetPolicy
from tau2_a2a.service.jobs.child import ChildOptions
from tau2_a2a.service.jobs.errors import EvaluationError
from tau2_a2a.service.jobs.limits import Limits
from tau2_a2a.service.jobs.manager import EvaluationManager
from tau2_a2a.service.tools import EvaluationTools, ToolError
from tests.support.service import GOOD
from tests.support.targets import RESOLVER


def test_queue_positions_queue_limit_and_canceling(tmp_path: Path) -> None:
    """Evaluations beyond max_running wait in order; beyond max_queued they are refused.

    The evaluation processes here are stand-ins that just sleep: this is about the queue.
    """
    sleeper = tmp_path / "sleeper"
    sleeper.write_text("#!/bin/sh\nexec sleep 60\n")
    sleeper.chmod(0o755)
    children = ChildOptions(python=str(sleeper))
    manager = EvaluationManager(tmp_path / "results", Limits(max_running=1, max_queued=2), children=children).start()
    tools = EvaluationTools(manager, TargetPolicy(resolver=RESOLVER))
    try:
        first, second, third = (tools.call("run_tau2_evaluation", {**GOOD, "task_ids": [str(i)]}) for i in range(3))
        assert [r["status"] for r in (first, second, third)] == ["running", "queued", "queued"]
        assert (second["queue_position"], third["queue_position"]) == (1, 2)
        with pytest.raises(ToolError, match=r"The evaluation queue is full \(2 waiting, 1 running\)"):
            tools.call("run_tau2_evaluation", GOOD)
        assert tools.cancel_evaluation(second["evaluation_id"])["status"] == "canceled"
        assert tools.get_evaluation(third["evaluation_id"])["queue_position"] == 1
        canceled = tools.cancel_evaluation(first["evaluation_id"])
        assert canceled["status"] == "canceled" and canceled["result"]["metrics"]["num_simulations"] == 0
        assert tools.get_evaluation(third["evaluation_id"])["status"] == "running"  # its turn came
    finally:
        manager.close()
    # A service that stops leaves its running evaluation to the next one, which resumes it.
    restarted = EvaluationManager(tmp_path / "results", Limits(max_running=1, max_queued=2), children=children).start()
    try:
        again = restarted.get(third["evaluation_id"]).to_json()
        assert (again["status"], again["resumed"], again["error"]) == ("running", 1, None)
        assert restarted.get(first["evaluation_id"]).to_json()["status"] == "canceled"
    finally:
        restarted.close()
    import sqlite3

    with sqlite3.connect(tmp_path / "results" / "service.sqlite") as database:
        rows = database.execute("SELECT evaluation_id, status, record FROM tau2_eval_evaluations").fetchall()
    assert {evaluation_id: status for evaluation_id, status, _ in rows} == {
        first["evaluation_id"]: "canceled", second["evaluation_id"]: "canceled", third["evaluation_id"]: "running"}
    assert not [record for _, _, record in rows if "status" in json.loads(record)]  # kept once: the column


def test_an_evaluation_whose_process_cannot_start_fails_saying_so_and_the_queue_goes_on(tmp_path: Path) -> None:
    """A child that cannot start (here: the interpreter is missing) ends its evaluation as failed, in words a
    caller can act on and without the service's paths, instead of leaving it running with no process; the
    evaluations queued behind it are started (and end the same way), and the service keeps answering."""
    missing = tmp_path / "no-such-python"
    manager = EvaluationManager(tmp_path / "results", Limits(max_running=1, max_queued=3),
                                children=ChildOptions(python=str(missing))).start()
    tools = EvaluationTools(manager, TargetPolicy(resolver=RESOLVER))
    try:
        answers = [tools.call("run_tau2_evaluation", {**GOOD, "task_ids": [str(i)]}) for i in range(3)]
        for answer in answers:
            ended = manager.wait(answer["evaluation_id"], timeout=30).to_json()
            assert ended["status"] == "failed", ended
            assert ended["error"] == (
                "the service could not start this evaluation's process (FileNotFoundError); finished simulations, "
                "if any, are kept. Submit it again later, or ask the service's operator: its log says why.")
            assert str(missing) not in json.dumps(ended)
        assert manager.scheduler.supervisor.running() == 0
        assert [view.status.value for view in manager.list()] == ["failed"] * 3
    finally:
        manager.close()


def test_evaluations_run_below_the_service_priority(tmp_path: Path) -> None:
    """An evaluation's process runs 10 nice steps below the service (the default), in a session of its own
    whose autogroup (Linux) is lowered too: autogroup scheduling shares the CPU between sessions whatever
    their processes' nice values."""
    import os

    sleeper = tmp_path / "sleeper"
    sleeper.write_text("#!/bin/sh\nexec sleep 60\n")
    sleeper.chmod(0o755)
    with pytest.raises(EvaluationError, match="0 to 19 nice steps below the service, got 20: set --evaluation-nice"):
        ChildOptions(python=str(sleeper), nice=20)
    manager = EvaluationManager(tmp_path / "results", children=ChildOptions(python=str(sleeper))).start()
    tools = EvaluationTools(manager, TargetPolicy(resolver=RESOLVER))
    try:
        record = tools.call("run_tau2_evaluation", GOOD)
        job = manager.scheduler.supervisor.job(record["evaluation_id"])
        assert job is not None and job.child is not None
        pid = job.child.pid
        assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + 10)
        assert os.getsid(pid) == pid
        autogroup = Path(f"/proc/{pid}/autogroup")
        if autogroup.exists():
            assert autogroup.read_text().split()[-1] == "10"  # "/autogroup-N nice 10"
    finally:
        manager.close()
