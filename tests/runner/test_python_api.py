"""The Python API: RunSettings evaluated by tau2_a2a.api.evaluate; registering with tau2 happens once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tau2_a2a import api
from tau2_a2a.runner.protocol_metrics import metrics_path
from tau2_a2a.tau2bench.run.layout import results_path
from tau2_a2a.tau2bench.seam import hooks
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, NVIDIA, RunConfig, registry, run_domain


def test_registering_twice_registers_once() -> None:
    hooks.register()
    hooks.register()
    info = registry.get_info()
    assert info.agents.count("a2a_agent") == 1 and info.agents.count("oracle_agent") == 1
    assert info.users.count("scripted_user") == 1


def test_evaluate_an_a2a_agent_from_python(oracle_url: str, tmp_path: Path) -> None:
    token = "python-api-secret-token"
    settings = api.RunSettings(
        domain="airline", a2a=api.A2AConfig(endpoint=oracle_url, auth_token=token, timeout=60),
        user="scripted_user", user_llm="scripted", user_llm_args={}, task_ids=["0", "1"],
        results_dir=str(tmp_path), save_to="api",
    )
    outcome = api.evaluate(settings)
    assert sorted((s.task_id, s.reward_info.reward) for s in outcome.results.simulations) == [("0", 1.0), ("1", 1.0)]
    assert outcome.metrics is not None
    assert outcome.metrics["run"]["simulations"] == 2 and outcome.metrics["run"]["failed_requests"] == 0
    assert [r["method"] for r in outcome.metrics["discovery"]["requests"]] == ["GetAgentCard", "GetTask"]
    saved = results_path("api", tmp_path).read_text()
    assert token not in saved and token not in metrics_path(results_path("api", tmp_path)).read_text()
    assert json.loads(saved)["info"]["agent_info"]["llm_args"]["a2a_timeout"] == 60
    assert json.loads(saved)["info"]["agent_info"]["llm"] == "a2a-tau2-oracle"  # named after the card


def test_settings_travel_as_json_without_the_token(oracle_url: str) -> None:
    settings = api.RunSettings(domain="retail", a2a=api.A2AConfig(endpoint=oracle_url, auth_token="t0ken"),
                               task_ids=["3"], ray="local")
    data = settings.to_dict()
    assert "t0ken" not in json.dumps(data)
    assert api.RunSettings.from_dict(json.loads(json.dumps(data)), "t0ken") == settings
    with pytest.raises(api.ConfigError, match="Unknown run settings: colour"):
        api.RunSettings.from_dict({**data, "colour": "blue"})


@pytest.mark.skipif(DISTRIBUTION != NVIDIA, reason="upstream records a simulation's exception as an infrastructure "
                    "error rather than raising it, and writes under its data directory only")
def test_tau2s_own_run_domain_cannot_reach_an_a2a_agent_alone(tmp_path: Path) -> None:
    config = RunConfig(domain="airline", agent="a2a_agent", llm_agent="remote", user="scripted_user",
                       llm_user="scripted", llm_args_agent={}, llm_args_user={}, llm_args_judge={},
                       task_ids=["0"], results_dir=str(tmp_path), save_to="alone")
    with hooks.tau2_hooks(), pytest.raises(api.ConfigError, match="runs inside tau2-a2a's runner"):
        run_domain(config)
