"""The Python API: importing registers once, and tau2's own run_domain drives a2a_agent."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import tau2_a2a
from tau2.data_model.simulation import RunConfig
from tau2.registry import registry
from tau2.run import run_domain

from tau2_a2a.runner.protocol_metrics import metrics_path, write_report


def test_importing_twice_registers_once() -> None:
    importlib.reload(tau2_a2a)
    tau2_a2a.register()
    info = registry.get_info()
    assert info.agents.count("a2a_agent") == 1 and info.agents.count("oracle_agent") == 1
    assert info.users.count("scripted_user") == 1


def test_run_domain_with_a2a_settings_in_llm_args(oracle_url: str, tmp_path: Path) -> None:
    token = "python-api-secret-token"
    settings = tau2_a2a.A2AConfig(endpoint=oracle_url, auth_token=token, timeout=60).to_llm_args()
    config = RunConfig(
        domain="airline", agent="a2a_agent", llm_agent="remote", user="scripted_user",
        llm_user="scripted", llm_args_agent=settings, llm_args_user={}, llm_args_judge={},
        task_ids=["0", "1"], results_dir=str(tmp_path), save_to="api",
    )
    results = run_domain(config)
    assert sorted((s.task_id, s.reward_info.reward) for s in results.simulations) == [("0", 1.0), ("1", 1.0)]
    report = write_report(tmp_path / "api.json")
    assert report["run"]["simulations"] == 2 and report["run"]["failed_requests"] == 0
    saved = (tmp_path / "api.json").read_text()
    assert token not in saved and token not in metrics_path(tmp_path / "api.json").read_text()
    assert json.loads(saved)["info"]["agent_info"]["llm_args"]["a2a_timeout"] == 60
