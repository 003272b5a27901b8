"""An evaluation's result: its metrics from tau2's simulations."""

from __future__ import annotations

from tau2_a2a.service import summary


def test_metrics_pass_hat_k_and_per_trial_rewards() -> None:
    def sim(task: str, trial: int, reward: float, cost=0.5):
        return {"task_id": task, "trial": trial, "reward_info": {"reward": reward},
                "termination_reason": "user_stop", "agent_cost": cost}

    simulations = [sim("a", 0, 1.0), sim("a", 1, 1.0), sim("b", 0, 1.0), sim("b", 1, 0.0, None)]
    out = summary.outcome({"simulations": simulations}, None)
    # one simulation's cost not reported: the average is not known either (never over the others alone)
    assert out["metrics"] == {"avg_reward": 0.75, "pass_hat_k": {"1": 0.75, "2": 0.5}, "num_simulations": 4,
                              "avg_agent_cost": None}
    simulations[-1]["agent_cost"] = 0.25
    assert summary.outcome({"simulations": simulations}, None)["metrics"]["avg_agent_cost"] == 0.4375
    assert out["tasks"][1] == {"task_id": "b", "rewards": [1.0, 0.0], "avg_reward": 0.5, "trials": [
        {"trial": 0, "reward": 1.0, "termination_reason": "user_stop"},
        {"trial": 1, "reward": 0.0, "termination_reason": "user_stop"}]}
    assert summary.outcome(None, None)["metrics"]["num_simulations"] == 0
