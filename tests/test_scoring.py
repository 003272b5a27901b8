"""Scoring in worker processes: tau2's exact scores, and this process whenever the workers cannot."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tau2.data_model.simulation import RunConfig

from tau2_a2a.runner.processes import usable_cores
from tau2_a2a.runner.scoring import default_scoring_processes, scoring_in_processes
from tau2_a2a.reference.oracle_agent import step_parts
from tau2_a2a.tau2bench.oracle_script import OracleStep
from tests.agents import OracleLike, ReplyOnTask, agent_app
from tests.conftest import Serve, descendants, run_a2a

TASKS = ["0", "1", "2", "3"]
REPO = Path(__file__).resolve().parents[1]


def reward_infos(outcome) -> dict[str, dict]:
    return {s.task_id: s.reward_info.model_dump(mode="json") for s in outcome.results.simulations}


def test_scores_from_workers_equal_scores_in_this_process(serve: Serve, tmp_path: Path) -> None:
    """In task 2 the agent sends an extra certificate of 500, so its database differs: reward 0 next to 1.0s."""
    extra = step_parts(OracleStep(tool_name="send_certificate",
                                  arguments={"user_id": "noah_muller_9847", "amount": 500}))
    first = serve(lambda url: agent_app(ReplyOnTask("2", extra, at=3), url))
    second = serve(lambda url: agent_app(ReplyOnTask("2", extra, at=3), url))

    here = run_a2a(first.url, tmp_path / "here", task_ids=TASKS, scoring_processes=0)
    with scoring_in_processes(2) as pool:
        in_workers = run_a2a(second.url, tmp_path / "workers", task_ids=TASKS, scoring_processes=2)

    assert pool is not None and (pool.scored_in_workers, pool.scored_here) == (len(TASKS), 0)
    assert {task: info["reward"] for task, info in reward_infos(here).items()} == {
        "0": 1.0, "1": 1.0, "2": 0.0, "3": 1.0}
    assert reward_infos(in_workers) == reward_infos(here)
    assert reward_infos(here)["2"]["db_check"] == {"db_match": False, "db_reward": 0.0}


REGISTERS_AIRLINE_COPY = """
import json, sys
from pathlib import Path
from tau2.domains.airline.environment import get_environment, get_tasks
from tau2.registry import registry
from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card
from tau2_a2a.runner.scoring import scoring_in_processes
from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, free_port
from tests.conftest import run_a2a

registry.register_domain(get_environment, "airline_copy")
registry.register_tasks(get_tasks, "airline_copy")
port = free_port()
url = f"http://127.0.0.1:{port}"
with BackgroundServer(a2a_app(OracleExecutor(), oracle_card(url)), port=port), scoring_in_processes(2) as pool:
    outcome = run_a2a(url, Path(sys.argv[1]), "airline_copy", task_ids=["0", "1"], scoring_processes=2)
print(json.dumps({"pool": pool is not None, "in_workers": pool.scored_in_workers, "here": pool.scored_here,
                  "rewards": [s.reward_info.reward for s in outcome.results.simulations]}))
"""


def test_domain_registered_only_here_is_scored_here(tmp_path: Path) -> None:
    """A fresh interpreter has tau2's domains only; one registered at runtime stays in that process.

    The registration is tau2's public one, in a process of its own (with its own oracle, which must
    know the domain too): tau2 has no way to take a domain back, and this test session's other tests
    expect tau2's domains only.
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, "-c", REGISTERS_AIRLINE_COPY, str(tmp_path)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome == {"pool": True, "in_workers": 0, "here": 2, "rewards": [1.0, 1.0]}


def test_killed_scoring_workers_fall_back_to_this_process(oracle_url: str, tmp_path: Path) -> None:
    with scoring_in_processes(2) as pool:
        run_a2a(oracle_url, tmp_path / "first", task_ids=["0"], scoring_processes=2)
        workers = scoring_workers()
        assert workers, "the first run's scoring started no worker"
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        outcome = run_a2a(oracle_url, tmp_path / "second", task_ids=["1", "2"], scoring_processes=2)

    assert pool is not None and (pool.scored_in_workers, pool.scored_here) == (1, 2)
    assert pool.broken
    assert [s.reward_info.reward for s in outcome.results.simulations] == [1.0, 1.0]


def test_workers_leave_with_the_pool(oracle_url: str, tmp_path: Path) -> None:
    with scoring_in_processes(2):
        run_a2a(oracle_url, tmp_path, task_ids=["0"], scoring_processes=2)
        workers = scoring_workers()
    assert workers
    deadline = time.monotonic() + 30
    while workers & descendants(os.getpid()):
        assert time.monotonic() < deadline, "scoring workers outlived their pool"
        time.sleep(0.1)


def test_default_is_one_process_per_core_up_to_the_concurrency_for_runs_worth_it() -> None:
    def default(**run: Any) -> int:
        return default_scoring_processes(RunConfig(domain="airline", **run))

    cores = usable_cores()
    assert default(max_concurrency=1) == 0  # one simulation at a time: nothing to overlap
    assert default(max_concurrency=64) == (cores if cores > 1 else 0)  # the whole domain
    assert default(max_concurrency=2, num_tasks=20) == (2 if cores > 1 else 0)
    assert default(max_concurrency=2, task_ids=["0", "1"], num_trials=10) == (2 if cores > 1 else 0)
    assert default(max_concurrency=8, num_tasks=5) == 0  # starting the pool costs more than it saves
    assert default(max_concurrency=8, num_tasks=19) == 0


def scoring_workers() -> set[int]:
    """This process's scoring workers: the processes its fork server started."""
    servers = {pid for pid in descendants(os.getpid()) if b"forkserver" in _cmdline(pid)}
    return set().union(*(descendants(server) for server in servers))


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


UNGUARDED_SCRIPT = """
import sys
from tau2.data_model.simulation import RunConfig
import tau2_a2a
from tau2_a2a.runner.run import evaluate

config = RunConfig(domain="airline", agent="a2a_agent", llm_agent="a2a-test", user="scripted_user",
                   llm_user="scripted", llm_args_user={}, llm_args_agent={}, llm_args_judge={},
                   results_dir=sys.argv[2], save_to="run", max_concurrency=2, task_ids=["0", "1"])
outcome = evaluate(config, tau2_a2a.A2AConfig(endpoint=sys.argv[1]), scoring_processes=2)
print("REWARDS", [s.reward_info.reward for s in outcome.results.simulations])
"""


def test_unguarded_script_is_not_run_again_by_its_scoring_processes(serve: Serve, tmp_path: Path) -> None:
    """Python re-runs the main script in each new process; the evaluation in it must not start again."""
    agent = OracleLike()
    server = serve(lambda url: agent_app(agent, url))
    script = tmp_path / "evaluate_my_agent.py"
    script.write_text(UNGUARDED_SCRIPT)
    run = subprocess.run([sys.executable, str(script), server.url, str(tmp_path / "results")],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})

    assert run.returncode == 0, run.stderr[-3000:]
    assert "REWARDS [1.0, 1.0]" in run.stdout
    assert "put the call under `if __name__ == \"__main__\":`" in run.stderr
    assert "Scoring processes stopped" in run.stderr
    assert sorted({seen.task for seen in agent.seen}) == ["0", "1"]
    assert len({seen.context_id for seen in agent.seen}) == 2  # two conversations: no second evaluation
