"""The oracle over A2A scores exactly what it scores natively, turn for turn.

CI runs a subset across domains; bench/oracle_fidelity.py runs whole splits.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tau2_a2a.tau2bench.run.fidelity import trajectory_differences
from tests.support.runs import run_a2a, run_native_oracle

SUBSETS = {
    "airline": ["0", "1", "2", "7", "9", "13"],
    "retail": ["0", "1", "5", "7"],  # scored without an LLM in every tau2 (upstream judges NL assertions of task 2)
    "mock": None,
}


@pytest.mark.parametrize("domain", sorted(SUBSETS))
def test_oracle_over_a2a_matches_native(domain: str, oracle_url: str, tmp_path: Path) -> None:
    task_ids = SUBSETS[domain]
    over_a2a = run_a2a(oracle_url, tmp_path / "a2a", domain, task_ids=task_ids, num_trials=2,
                       max_concurrency=3).results
    native = run_native_oracle(tmp_path / "native", domain, task_ids=task_ids, num_trials=2,
                               max_concurrency=3)

    expected_count = 2 * (len(task_ids) if task_ids else len(native.tasks))
    assert len(over_a2a.simulations) == expected_count
    native_rewards = {(s.task_id, s.trial): s.reward_info.reward for s in native.simulations}
    a2a_rewards = {(s.task_id, s.trial): s.reward_info.reward for s in over_a2a.simulations}
    assert a2a_rewards == native_rewards
    if domain != "mock":  # mock tasks have no communicate_info/golden path for every task
        assert set(a2a_rewards.values()) == {1.0}
    assert trajectory_differences(over_a2a, native) == []


def test_every_tool_call_runs_locally(oracle_url: str, tmp_path: Path) -> None:
    """Each tool call the agent asked for has exactly one tool result in tau2's trajectory."""
    results = run_a2a(oracle_url, tmp_path, "airline", task_ids=["1", "9"]).results
    for simulation in results.simulations:
        calls = [c.id for m in simulation.messages if m.role == "assistant" for c in (m.tool_calls or [])]
        results_ids = [m.id for m in simulation.messages if m.role == "tool"]
        assert calls and calls == results_ids
