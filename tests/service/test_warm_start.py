"""Warm starts: each evaluation's process is forked from the service's fork server, isolated as a cold one was.

Real parts throughout: the job core (EvaluationManager) with its fork server, the reference oracle and a
hostile trickling agent on loopback, tau2's airline domain and scoring. Every wait is on an event or a
condition, with generous timeouts (the machine may be very busy).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.middleware import Middleware

from tau2_a2a.client.targets import TargetPolicy
from tau2_a2a.protocol.hosting import BackgroundServer
from tau2_a2a.reference.oracle_agent import OracleExecutor
from tau2_a2a.service.jobs.child import ChildOptions
from tau2_a2a.service.jobs.directory import results_file
from tau2_a2a.service.jobs.limits import Limits
from tau2_a2a.service.jobs.manager import EvaluationManager
from tau2_a2a.service.jobs.warm import WarmProcess
from tau2_a2a.service.tools import EvaluationTools
from testbed.hostile_agent import HostileAgent, Hostility
from tests.support.executors import agent_app
from tests.support.middleware import RequireBearer
from tests.support.processes import descendants, gone
from tests.support.runs import saved_simulations
from tests.support.service import LOOPBACK_TARGETS
from tests.support.waiting import wait_until

GENEROUS = 600.0  # seconds: an evaluation of a few tasks on a busy 2-core machine
TOKENS = ("warm-token-a-51f0", "warm-token-b-9c2e")
SERVICE_SECRET = "service-secret-7e3a"


def arguments(endpoint: str, tasks: int = 1, **more: Any) -> dict[str, Any]:
    return {"domain": "airline", "agent_endpoint": endpoint, "user": "scripted_user",
            "task_ids": [str(task) for task in range(tasks)], **more}


def warm_manager(root: Path, *, max_running: int = 2, **options: Any) -> EvaluationManager:
    """A started manager whose fork server is ready (evaluations at the suite's priority, as start_service)."""
    options.setdefault("nice", 0)
    manager = EvaluationManager(root, Limits(max_running=max_running),
                                children=ChildOptions(allowed_targets=LOOPBACK_TARGETS, **options)).start()
    forkserver = manager.scheduler.supervisor.forkserver
    assert forkserver is not None and forkserver.wait_ready(GENEROUS), "the fork server did not get ready"
    return manager


@pytest.fixture(scope="module")
def manager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EvaluationManager]:
    """One service's job core for the module: its fork server imports tau2 once."""
    started = warm_manager(tmp_path_factory.mktemp("warm") / "results")
    yield started
    started.close()


@pytest.fixture(scope="module")
def tools(manager: EvaluationManager) -> EvaluationTools:
    return EvaluationTools(manager, TargetPolicy.from_entries(LOOPBACK_TARGETS))


def forked(manager: EvaluationManager, evaluation_id: str) -> WarmProcess:
    """The running evaluation's process, which must have been forked by the fork server."""
    job = manager.scheduler.supervisor.job(evaluation_id)
    assert job is not None and job.child is not None, "the evaluation is not running here"
    process = job.child.process
    assert isinstance(process, WarmProcess), f"started cold: {process!r}"
    return process


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_an_evaluation_forked_warm_scores_exactly_as_before(
        manager: EvaluationManager, tools: EvaluationTools, serve: Callable[..., BackgroundServer]) -> None:
    slow = serve(lambda url: agent_app(OracleExecutor(delay=0.3), url))
    evaluation_id = tools.call("run_tau2_evaluation", arguments(slow.url, tasks=3))["evaluation_id"]
    process = forked(manager, evaluation_id)
    forkserver = manager.scheduler.supervisor.forkserver
    assert forkserver is not None and parent_of(process.pid) == forkserver.pid
    assert os.getsid(process.pid) == process.pid  # a session of its own, stopped with it
    ended = manager.wait(evaluation_id, GENEROUS).to_json()
    assert ended["status"] == "completed", ended
    assert ended["result"]["metrics"] == {"avg_reward": 1.0, "pass_hat_k": {"1": 1.0}, "num_simulations": 3,
                                          "avg_agent_cost": None}
    assert process.returncode == 0
    directory = manager.root / evaluation_id
    for private in (directory / "child.log", results_file(directory)):
        assert private.stat().st_mode & 0o777 == 0o600, private


def test_two_evaluations_get_their_own_secrets(
        manager: EvaluationManager, tools: EvaluationTools, serve: Callable[..., BackgroundServer]) -> None:
    """Two targets that each take only their own bearer token: each evaluation's process was handed its own,
    and neither is in any process's command line or environment."""
    targets = [serve(lambda url, token=token: agent_app(OracleExecutor(delay=0.3), url,
                                                         [Middleware(RequireBearer, token=token)]))
               for token in TOKENS]
    ids = [tools.call("run_tau2_evaluation", arguments(target.url, tasks=2, agent_auth_token=token))["evaluation_id"]
           for target, token in zip(targets, TOKENS, strict=True)]
    processes = [forked(manager, evaluation_id) for evaluation_id in ids]
    forkserver = manager.scheduler.supervisor.forkserver
    assert forkserver is not None and forkserver.pid is not None
    for pid in (forkserver.pid, *(process.pid for process in processes)):
        try:
            seen = Path(f"/proc/{pid}/environ").read_bytes() + Path(f"/proc/{pid}/cmdline").read_bytes()
        except FileNotFoundError:
            continue  # already ended
        assert not any(secret.encode() in seen for secret in TOKENS), pid
    for evaluation_id in ids:
        ended = manager.wait(evaluation_id, GENEROUS).to_json()
        assert (ended["status"], ended["result"]["metrics"]["avg_reward"]) == ("completed", 1.0), ended


def test_a_child_killed_with_sigkill_fails_only_its_evaluation(
        manager: EvaluationManager, tools: EvaluationTools, serve: Callable[..., BackgroundServer]) -> None:
    slow = serve(lambda url: agent_app(OracleExecutor(delay=0.5), url))
    killed, spared = (tools.call("run_tau2_evaluation", arguments(slow.url, tasks=3))["evaluation_id"]
                      for _ in range(2))
    victim = forked(manager, killed)
    os.kill(victim.pid, signal.SIGKILL)
    ended = manager.wait(killed, GENEROUS).to_json()
    assert (ended["status"], ended["error"]) == (
        "failed", "the evaluation process was killed by SIGKILL before its run ended.")
    other = manager.wait(spared, GENEROUS).to_json()
    assert (other["status"], other["result"]["metrics"]["avg_reward"]) == ("completed", 1.0), other
    # The fork server lives on: the next evaluation is forked warm and scores as ever.
    after = tools.call("run_tau2_evaluation", arguments(slow.url))["evaluation_id"]
    forked(manager, after)
    assert manager.wait(after, GENEROUS).to_json()["result"]["metrics"]["avg_reward"] == 1.0


def test_a_trickling_agent_frees_its_slot_and_the_queued_evaluation_starts(
        tmp_path: Path, oracle_url: str) -> None:
    """One slot, at the default 10 nice steps below the service: an agent that trickles its card holds it
    for its 4 s timeout, and the oracle's evaluation queued behind it then runs, forked warm."""
    from tau2_a2a.client.config import AgentLimits

    manager = warm_manager(tmp_path / "results", max_running=1, nice=10, agent_limits=AgentLimits(timeout=4))
    tools = EvaluationTools(manager, TargetPolicy.from_entries(LOOPBACK_TARGETS))
    try:
        with HostileAgent(Hostility(trickle="card", trickle_seconds=1)) as trickling:
            held = tools.call("run_tau2_evaluation", arguments(trickling.url))
            queued = tools.call("run_tau2_evaluation", arguments(oracle_url))
            assert (held["status"], queued["status"], queued["queue_position"]) == ("running", "queued", 1)
            forked(manager, held["evaluation_id"])
            failed = manager.wait(held["evaluation_id"], GENEROUS).to_json()
        assert (failed["status"], failed["error"]) == ("failed", (
            f"the evaluation process exited with code 2: Fetching the agent card {trickling.url}/.well-known/"
            "agent-card.json timed out after 4s; raise the service's --agent-timeout if the agent is slow."))
        forked(manager, queued["evaluation_id"])  # its turn came when the slot was freed
        ended = manager.wait(queued["evaluation_id"], GENEROUS).to_json()
        assert (ended["status"], ended["result"]["metrics"]["avg_reward"]) == ("completed", 1.0), ended
    finally:
        manager.close()


# A service's job core as a process of its own, to be SIGKILLed: it prints its fork server's pid once that is
# ready, then the id of the evaluation it forked warm, and serves until killed.
_SERVICE = """
import sys, threading
from pathlib import Path
from tests.service.test_warm_start import arguments, forked, warm_manager
from tau2_a2a.client.targets import TargetPolicy
from tau2_a2a.service.tools import EvaluationTools
from tests.support.service import LOOPBACK_TARGETS
manager = warm_manager(Path(sys.argv[1]))
print(manager.scheduler.supervisor.forkserver.pid, flush=True)
tools = EvaluationTools(manager, TargetPolicy.from_entries(LOOPBACK_TARGETS))
evaluation_id = tools.call("run_tau2_evaluation", arguments(sys.argv[2], tasks=6))["evaluation_id"]
forked(manager, evaluation_id)
print(evaluation_id, flush=True)
threading.Event().wait()
"""


def test_a_killed_service_takes_its_fork_server_and_children_along_and_the_next_one_resumes(
        tmp_path: Path, serve: Callable[..., BackgroundServer]) -> None:
    slow = serve(lambda url: agent_app(OracleExecutor(delay=0.4), url))
    root = tmp_path / "results"
    env = {**os.environ, "TAU2_EVAL_AUTH_TOKEN": SERVICE_SECRET}
    service = subprocess.Popen([sys.executable, "-c", _SERVICE, str(root), slow.url], stdout=subprocess.PIPE,
                               env=env, text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        assert service.stdout is not None
        forkserver_pid = int(service.stdout.readline())
        evaluation_id = service.stdout.readline().strip()
        assert evaluation_id.startswith("ev-"), "the service process ended early"
        assert SERVICE_SECRET.encode() not in Path(f"/proc/{forkserver_pid}/environ").read_bytes()
        path = results_file(root / evaluation_id)
        wait_until(lambda: len(saved_simulations(path) or []) >= 2, "two simulations", timeout=GENEROUS)
        children = descendants(service.pid)
        assert forkserver_pid in children and len(children) >= 2  # the fork server and the evaluation
        service.send_signal(signal.SIGKILL)
        service.wait()
        wait_until(lambda: gone(children), "the fork server and the evaluation ending with their service", 30)
    finally:
        if service.poll() is None:
            service.kill()
            service.wait()
    restarted = warm_manager(root)
    try:
        ended = restarted.wait(evaluation_id, GENEROUS).to_json()
    finally:
        restarted.close()
    assert (ended["status"], ended["resumed"]) == ("completed", 1), ended
    assert ended["result"]["metrics"]["avg_reward"] == 1.0
    simulations = saved_simulations(results_file(root / evaluation_id))
    assert simulations is not None
    assert Counter((s["task_id"], s["trial"]) for s in simulations) == Counter((str(t), 0) for t in range(6))


def test_a_fork_server_that_cannot_start_leaves_evaluations_cold_saying_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from tau2_a2a.service.jobs.warm import ForkServer

    broken = tmp_path / "broken-python"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    with caplog.at_level("WARNING", logger="tau2_a2a.service"):
        forkserver = ForkServer(str(broken), {})
        forkserver.start()
        assert not forkserver.wait_ready(GENEROUS) and not forkserver.ready
        forkserver.close()
        missing = ForkServer(str(tmp_path / "no-such-python"), {})
        missing.start()
        assert not missing.wait_ready(GENEROUS)
    assert [record.getMessage() for record in caplog.records] == [
        "the fork server ended before it was ready (exit code 3; its output is above in this log); evaluations "
        "start cold",
        f"the fork server could not start (FileNotFoundError: [Errno 2] No such file or directory: "
        f"'{tmp_path / 'no-such-python'}'); evaluations start cold"]


def test_the_evaluation_start_setting() -> None:
    from tau2_a2a.errors import ConfigError
    from tau2_a2a.service.settings import ServiceSettings

    assert ServiceSettings.from_env({}).evaluation_start == "warm"
    assert ServiceSettings.from_env({"TAU2_EVAL_EVALUATION_START": "cold"}).evaluation_start == "cold"
    with pytest.raises(ConfigError, match=r"^--evaluation-start \(TAU2_EVAL_EVALUATION_START\) is warm or cold, "
                                          r"got 'tepid'\.$"):
        ServiceSettings.from_env({"TAU2_EVAL_EVALUATION_START": "tepid"})
    assert ChildOptions(warm=False).forkserver() is None
