"""The fork server started on first need, and an evaluation that arrives while it imports waits for it.

A service that runs no evaluation imports no tau2; an evaluation that arrives while the fork server imports
is forked warm once it is ready, rather than importing tau2 a second time beside it; the wait is on a thread
of its own, bounded, and falls back to a cold start. Real parts: the job core, its fork server, the oracle on
loopback, tau2's airline domain; fork servers that never get ready or fail are small scripts.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tau2_a2a.client.targets import TargetPolicy
from tau2_a2a.protocol.hosting import BackgroundServer
from tau2_a2a.reference.oracle_agent import OracleExecutor
from tau2_a2a.service.jobs import warm
from tau2_a2a.service.jobs.child import ChildOptions
from tau2_a2a.service.jobs.directory import CHILD_LOG
from tau2_a2a.service.jobs.limits import Limits
from tau2_a2a.service.jobs.manager import EvaluationManager
from tau2_a2a.service.jobs.warm import ForkServer, StartingProcess, WarmProcess
from tau2_a2a.service.request import EvaluationRequest
from tau2_a2a.service.tools import EvaluationTools
from tests.support.executors import agent_app
from tests.support.service import LOOPBACK_TARGETS

GENEROUS = 600.0  # seconds: a fork server's import and an evaluation on a busy 2-core machine


def script(tmp_path: Path, name: str, body: str) -> str:
    """A stand-in for the fork server's interpreter: a shell script run as `python -m MODULE FD`."""
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_a_job_core_that_runs_no_evaluation_starts_no_fork_server(tmp_path: Path) -> None:
    manager = EvaluationManager(tmp_path / "results", Limits(), children=ChildOptions(nice=0)).start()
    try:
        forkserver = manager.scheduler.supervisor.forkserver
        assert forkserver is not None and forkserver.available and not forkserver.ready
        manager.scheduler.settle()
        assert forkserver.pid is None
    finally:
        manager.close()
    assert forkserver.pid is None and not forkserver.available


def test_an_evaluation_that_arrives_first_waits_for_the_fork_server_and_is_forked_warm(
        tmp_path: Path, serve: Callable[..., BackgroundServer]) -> None:
    agent = serve(lambda url: agent_app(OracleExecutor(), url))
    manager = EvaluationManager(tmp_path / "results", Limits(),
                                children=ChildOptions(nice=0, allowed_targets=LOOPBACK_TARGETS)).start()
    try:
        tools = EvaluationTools(manager, TargetPolicy.from_entries(LOOPBACK_TARGETS))
        evaluation_id = tools.call("run_tau2_evaluation", {
            "domain": "airline", "agent_endpoint": agent.url, "user": "scripted_user", "task_ids": ["0"]})["evaluation_id"]
        job = manager.scheduler.supervisor.job(evaluation_id)
        assert job is not None and job.child is not None
        starting = job.child.process
        assert isinstance(starting, StartingProcess), f"did not wait for the fork server: {starting!r}"
        process = starting.wait_started()
        assert isinstance(process, WarmProcess), f"started cold: {process!r}"
        forkserver = manager.scheduler.supervisor.forkserver
        assert forkserver is not None and parent_of(process.pid) == forkserver.pid
        ended = manager.wait(evaluation_id, GENEROUS).to_json()
        assert ended["status"] == "completed", ended
        assert ended["result"]["metrics"]["avg_reward"] == 1.0
    finally:
        manager.close()


def request() -> EvaluationRequest:
    return EvaluationRequest(domain="airline", agent_endpoint="http://127.0.0.1:9", total_simulations=1)


def test_a_start_waiting_for_the_fork_server_leaves_its_caller_free_and_a_cancel_keeps_it_from_starting(
        tmp_path: Path) -> None:
    forkserver = ForkServer(script(tmp_path, "importing-python", "exec sleep 600"), {})  # never ready
    forkserver.start()
    try:
        run = ChildOptions(nice=0).start(request(), tmp_path / "evaluation", None, forkserver=forkserver)
        assert isinstance(run.process, StartingProcess) and run.process.poll() is None
        assert forkserver.pid is not None and not forkserver.ready  # launched by this first need, importing
        run.stop()
        assert run.wait() == -9 and run.process.wait_started() is None
        assert not (tmp_path / "evaluation" / CHILD_LOG).exists()  # no process ever ran for it
    finally:
        forkserver.close()


@pytest.mark.parametrize(("body", "said"), [
    ("exit 3", "the fork server failed to start"),
    ("exec sleep 600", "the fork server was not ready within 1 s"),
], ids=["fails", "never-ready"])
def test_a_start_whose_fork_server_fails_or_is_late_starts_cold_saying_so(
        tmp_path: Path, body: str, said: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(warm, "WAIT_SECONDS", 1.0)
    forkserver = ForkServer(script(tmp_path, "forkserver-python", body), {})
    forkserver.start()
    directory = tmp_path / "evaluation"
    try:
        with caplog.at_level("WARNING", logger="tau2_a2a.service"):
            run = ChildOptions(nice=0).start(request(), directory, None, forkserver=forkserver)
            assert isinstance(run.process, StartingProcess)
            process = run.process.wait_started()
            assert isinstance(process, subprocess.Popen) and process.args[1:] == ["-m", "tau2_a2a.runner"]
            run.stop()
        assert f"evaluation in evaluation starts cold: {said}" in [r.getMessage() for r in caplog.records]
    finally:
        forkserver.close()
