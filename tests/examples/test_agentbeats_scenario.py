"""examples/agentbeats/scenario.toml, run as AgentBeats' tutorial runner runs it, with no Docker: each agent's `cmd`
started as it is (split as a shell would, this environment's bin first on PATH), their cards awaited at the
endpoints, then the assessment request the runner builds (each participant's role and endpoint, and [config])
sent to the green agent: the oracle scores 1 on every task.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.types import TaskState

from tests.support.assessments import assess, result_of
from tests.support.paths import REPO
from tests.support.started import Started

SCENARIO = REPO / "examples" / "agentbeats" / "scenario.toml"


@pytest.fixture(scope="module")
def scenario() -> dict[str, Any]:
    return tomllib.loads(SCENARIO.read_text())


@pytest.fixture(scope="module")
def started(scenario: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The participants, then the green agent, as the runner starts them; stopped after."""
    folder = tmp_path_factory.mktemp("scenario")
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           # the service's evaluations at the suite's priority (tests/support/service.py, start_service)
           "TAU2_EVAL_EVALUATION_NICE": "0"}
    agents = [*scenario["participants"], scenario["green_agent"]]
    processes = [Started(shlex.split(agent["cmd"]), folder, env=env) for agent in agents]
    try:
        for agent, process in zip(agents, processes, strict=True):
            process.card(agent["endpoint"])
        yield
    finally:
        for process in reversed(processes):
            process.stop()


def test_the_scenario_names_one_green_agent_and_the_oracle_as_its_agent(scenario: dict[str, Any]) -> None:
    assert [(p["role"], p["cmd"].split()[:3]) for p in scenario["participants"]] == [
        ("agent", ["tau2-a2a", "agent", "oracle"])]
    assert scenario["green_agent"]["cmd"].split()[:2] == ["tau2-a2a", "serve"]
    for agent in (scenario["green_agent"], *scenario["participants"]):  # each card advertises its endpoint
        assert f"--card-url {agent['endpoint']}" in agent["cmd"]


def test_the_scenario_runs_locally_and_the_oracle_scores_1(scenario: dict[str, Any], started: None) -> None:
    body = {"participants": {p["role"]: p["endpoint"] for p in scenario["participants"]},
            "config": scenario["config"]}
    _, task = asyncio.run(assess(scenario["green_agent"]["endpoint"], body))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    result = result_of(task)
    assert (result["domain"], result["num_tasks"], result["total_simulations"], result["avg_reward"],
            result["pass_hat_1"], result["clean"]) == ("airline", 3, 3, 1.0, 1.0, True)
    assert [t["avg_reward"] for t in result["tasks"]] == [1.0, 1.0, 1.0]
