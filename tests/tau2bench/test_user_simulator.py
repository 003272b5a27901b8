"""tau2's LLM user simulator over A2A, as real evaluations and AgentBeats use it by default.

The user's LLM is testbed/standin_llm.py on loopback, reached through LiteLLM's
own environment (OPENAI_API_BASE, OPENAI_API_KEY) as a provider would be; the
agent is the reference oracle over A2A. The stand-in opens with the task's
reason for calling and marker, and stops once the agent has spoken again, so
each simulation scores 1.0 with a trajectory known message for message.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from a2a.types import TaskState

from tau2_a2a.tau2bench.participants.oracle_script import oracle_steps
from tau2_a2a.tau2bench.run.layout import results_path
from tau2_a2a.tau2bench.seam.distribution import STOP, Results
from testbed.standin_llm import MODEL, StandinLLM, user_opening
from tests.support.cli import run_cli
from tests.support.service import ask, result_data, start_service

TASKS = ["1", "3"]
GREETING = "Hi! How can I help you today?"


@pytest.fixture
def user_llm(serve, monkeypatch: pytest.MonkeyPatch) -> StandinLLM:
    """The stand-in as the user's provider, configured the way an operator configures LiteLLM."""
    llm = StandinLLM.serve(serve)
    monkeypatch.setenv("OPENAI_API_BASE", llm.api_base)
    monkeypatch.setenv("OPENAI_API_KEY", "standin-user-key")
    return llm


def expected_trajectory(task_id: str) -> list[tuple[str, Any]]:
    """(role, text or tool call) of each message of an oracle simulation with the stand-in user."""
    expected: list[tuple[str, Any]] = [("assistant", GREETING), ("user", user_opening("airline", task_id))]
    for step in oracle_steps("airline", task_id):
        if step.tool_name is None:
            expected.append(("assistant", step.text))
        else:
            expected += [("assistant", (step.tool_name, step.arguments)), ("tool", None)]
    return expected + [("user", STOP)]


def trajectory(simulation: Any) -> list[tuple[str, Any]]:
    def shape(message: Any) -> tuple[str, Any]:
        if message.role == "tool":
            return ("tool", None)
        if getattr(message, "tool_calls", None):
            [call] = message.tool_calls
            return (message.role, (call.name, call.arguments))
        return (message.role, message.content)

    return [shape(m) for m in simulation.messages]


def check_user_requests(user_llm: StandinLLM, simulations: int) -> None:
    """Two user turns per simulation (opening, stop), each with tau2's user prompt after the agent's greeting."""
    asked = user_llm.user_requests()
    assert len(asked) == 2 * simulations
    for body in asked:
        assert body["model"] == "standin"
        [system] = [m for m in body["messages"] if m["role"] == "system"]
        assert "<scenario>" in system["content"]
        assert body["messages"][1] == {"role": "user", "content": GREETING}


def test_cli_run_with_the_llm_user_simulator(user_llm: StandinLLM, oracle_url: str, tmp_path: Path) -> None:
    process = run_cli(["run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", oracle_url,
                       "--user", "user_simulator", "--user-llm", MODEL, "--user-llm-args", '{"temperature": 0.0}',
                       "--task-ids", *TASKS, "--max-concurrency", "2", "--results-dir", str(tmp_path),
                       "--save-to", "run"], cwd=tmp_path)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-3000:]
    results = Results.load(results_path("run", tmp_path))
    simulations = {s.task_id: s for s in results.simulations}
    assert sorted(simulations) == TASKS
    for task_id, simulation in simulations.items():
        assert simulation.reward_info.reward == 1.0
        assert simulation.termination_reason.value == "user_stop"
        assert trajectory(simulation) == expected_trajectory(task_id)
    assert results.info.user_info.implementation == "user_simulator"
    assert results.info.user_info.llm == MODEL
    check_user_requests(user_llm, len(TASKS))
    assert "standin-user-key" not in results_path("run", tmp_path).read_text()


def test_service_evaluation_with_the_llm_user_simulator(user_llm: StandinLLM, oracle_url: str,
                                                        tmp_path: Path) -> None:
    service = start_service(tmp_path / "service", allowed_user_llms=(MODEL,))  # the operator allows the stand-in
    try:
        reply = asyncio.run(ask(service.url, "run_tau2_evaluation", {
            "domain": "airline", "agent_endpoint": oracle_url, "user": "user_simulator", "user_llm": MODEL,
            "user_llm_args": {"temperature": 0.0}, "task_ids": TASKS}))
    finally:
        service.stop()
    assert reply.status.state == TaskState.TASK_STATE_COMPLETED
    data = result_data(reply)
    assert data["request"]["user"] == "user_simulator" and data["request"]["user_llm"] == MODEL
    assert data["result"]["metrics"] == {"avg_reward": 1.0, "pass_hat_k": {"1": 1.0}, "num_simulations": 2,
                                         "avg_agent_cost": None}  # the oracle reports no usage
    # LiteLLM has no price for the stand-in user's model: tau2 records 0.0, which is not a cost anyone knows
    assert data["result"]["cost_per_conversation"] == {"agent": None, "user": None, "judge": 0.0, "total": None}
    assert [(t["task_id"], t["rewards"], [x["termination_reason"] for x in t["trials"]])
            for t in data["result"]["tasks"]] == [(t, [1.0], ["user_stop"]) for t in TASKS]
    [results_file] = (tmp_path / "service").rglob("results.json")
    simulations = {s.task_id: s for s in Results.load(results_file).simulations}
    for task_id in TASKS:
        assert trajectory(simulations[task_id]) == expected_trajectory(task_id)
    check_user_requests(user_llm, len(TASKS))
