"""Real tau2 runs for the tests: the A2A agent at a URL with the scripted user, or the native oracle."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tau2_a2a.client.config import A2AConfig, RetryPolicy
from tau2_a2a.protocol.hosting import BackgroundServer
from tau2_a2a.runner.outcome import RunOutcome
from tau2_a2a.runner.run import evaluate
from tau2_a2a.runner.settings import RunSettings
from tau2_a2a.tau2bench.run.layout import results_path, run_directory
from tau2_a2a.tau2bench.seam.distribution import RunConfig, load_tasks, run_to
from tau2_a2a.tau2bench.seam.hooks import tau2_hooks

Serve = Callable[[Callable[[str], Any]], BackgroundServer]
FAST = RetryPolicy(max_attempts=3, backoff_seconds=0.05)  # retries without slow tests


def run_a2a(url: str, results_dir: Path, domain: str = "airline", *,
            a2a: A2AConfig | None = None, **run_args: Any) -> RunOutcome:
    """Evaluate the A2A agent at `url` with the scripted user, results under `results_dir`."""
    settings = RunSettings(
        domain=domain, a2a=a2a or A2AConfig(endpoint=url, retry=FAST),
        agent_llm=run_args.pop("agent_llm", "a2a-test"), agent_llm_args={}, user="scripted_user",
        user_llm="scripted", user_llm_args={},
        results_dir=str(results_dir), save_to=run_args.pop("save_to", "run"),
        max_concurrency=run_args.pop("max_concurrency", 2), **run_args,
    )
    return evaluate(settings)


def run_native_oracle(results_dir: Path, domain: str = "airline", **run_args: Any):
    """The same oracle, natively in tau2 (no A2A; tau2's own run), for fidelity comparisons."""
    config = RunConfig(
        domain=domain, agent="oracle_agent", llm_agent="oracle", user="scripted_user",
        llm_user="scripted", llm_args_user={}, llm_args_agent={}, llm_args_judge={},
        results_dir=str(results_dir), save_to=run_args.pop("save_to", "native"),
        max_concurrency=run_args.pop("max_concurrency", 2), **run_args,
    )
    path = results_path(config.save_to, results_dir)
    with tau2_hooks():  # the oracle and the scripted user registered, tau2-a2a's parts in place as in a run
        return run_to(config, path, run_directory(path))


def saved_simulations(results_path: Path) -> list[dict] | None:
    """A results file's simulations, or None while it is missing or being rewritten."""
    try:
        return json.loads(results_path.read_text())["simulations"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return None


def telecom_sample(domain: str) -> list[str]:
    """Tasks of a telecom domain of every kind: both requestors (the first, and the one with the most
    hand-overs), the user alone, the agent alone."""
    tasks = load_tasks(domain, task_split_name="base")

    def requestors(task: Any) -> frozenset[str]:
        return frozenset(action.requestor for action in task.evaluation_criteria.actions or [])

    def hand_overs(task: Any) -> int:
        actions = task.evaluation_criteria.actions or []
        return sum(1 for i, a in enumerate(actions)
                   if a.requestor == "user" and (i == 0 or actions[i - 1].requestor != "user"))

    both = [task for task in tasks if requestors(task) == {"assistant", "user"}]
    chosen = [both[0], max(both, key=hand_overs)]
    chosen += [task for task in tasks if requestors(task) == {"user"}][:1]
    chosen += [task for task in tasks if requestors(task) == {"assistant"}][:1]
    return list(dict.fromkeys(task.id for task in chosen))
