"""One evaluation in several processes, merged into one tau2 results file.

tau2 runs simulations in threads of one interpreter, and its own work per
simulation (building and hashing the domain database) is CPU-bound Python: at
high concurrency one core under the GIL becomes the limit, and the A2A event
loop waits behind it. Shards spread the tasks over worker processes, each an
ordinary evaluation of its share; the parent merges their results into the
file tau2 would have written, with tau2's own summary files and our metrics.

Re-running the same command (same --save-to, same number of workers) resumes
each shard where it stopped.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tau2.data_model.simulation import Results, RunConfig
from tau2.metrics.agent_metrics import compute_metrics
from tau2.run import get_tasks, save_results_summary, save_termination_summary
from tau2.utils.display import ConsoleDisplay

from tau2_a2a.client.metrics import metrics_path, write_report
from tau2_a2a.client.run import RunOutcome, prepare_a2a_run, scrub_secrets
from tau2_a2a.client.scoring import default_scoring_processes
from tau2_a2a.config import AUTH_TOKEN_ENV, A2AConfig


class ShardFailed(RuntimeError):
    """A worker process failed; what it finished is kept for the next run."""


def evaluate_in_processes(config: RunConfig, a2a: A2AConfig, workers: int,
                          scoring_processes: int | None = None) -> RunOutcome:
    """Evaluate the A2A agent with `workers` processes; same results file as one process.

    The scoring processes (default: see `default_scoring_processes`) are
    shared out between the workers.
    """
    path = prepare_a2a_run(config, a2a)
    tasks = get_tasks(config.task_set_name or config.domain, config.task_split_name,
                      config.task_ids, config.num_tasks)
    ids = [task.id for task in tasks]
    shards = [ids[k::workers] for k in range(min(workers, len(ids)))]
    parts_dir = path.parent / f"{path.stem}_shards"
    if scoring_processes is None:
        scoring_processes = default_scoring_processes(config)
    children = [
        _start(config, shard, parts_dir, index, math.ceil(config.max_concurrency / len(shards)),
               math.ceil(scoring_processes / len(shards)), a2a)
        for index, shard in enumerate(shards)
    ]
    exit_codes = [child.wait() for child in children]
    failed = [(index, code) for index, code in enumerate(exit_codes) if code != 0]
    if failed:
        raise ShardFailed(
            f"worker(s) {', '.join(f'{i} (exit {c})' for i, c in failed)} failed; finished simulations "
            f"are kept in {parts_dir}. Re-run the same command to resume."
        )
    merged = _merge([Results.load(parts_dir / f"part{k}.json") for k in range(len(shards))], ids)
    path.write_text(merged.model_dump_json(indent=2))
    metrics = compute_metrics(merged)
    ConsoleDisplay.display_agent_metrics(metrics)
    save_results_summary(merged, metrics, path.parent / f"{path.stem}_results.json")
    save_termination_summary(merged, path.parent / f"{path.stem}_termination_summary.json")
    scrub_secrets(path)
    report = write_report(path)
    return RunOutcome(merged, path, metrics_path(path), report)


def _start(config: RunConfig, shard: list[str], parts_dir: Path, index: int,
           concurrency: int, scoring_processes: int, a2a: A2AConfig) -> subprocess.Popen:
    part = config.model_copy(update={
        "task_ids": shard, "num_tasks": None, "results_dir": str(parts_dir), "save_to": f"part{index}",
        "max_concurrency": concurrency,
    })
    env = dict(os.environ)
    if a2a.auth_token:
        env[AUTH_TOKEN_ENV] = a2a.auth_token  # the environment, never the command line
    child = subprocess.Popen([sys.executable, "-m", "tau2_a2a.client.shards"], stdin=subprocess.PIPE,
                             env=env, text=True)
    assert child.stdin is not None
    request = {"run_config": part.model_dump(mode="json"), "scoring_processes": scoring_processes}
    child.stdin.write(json.dumps(request))
    child.stdin.close()
    return child


def _merge(parts: list[Results], task_order: list[str]) -> Results:
    """One Results: the first part's info, the tasks in their order, every simulation."""
    position = {task_id: index for index, task_id in enumerate(task_order)}
    tasks = sorted((task for part in parts for task in part.tasks), key=lambda task: position[task.id])
    simulations = sorted((sim for part in parts for sim in part.simulations),
                         key=lambda sim: (sim.trial or 0, position[sim.task_id]))
    return Results(timestamp=parts[0].timestamp, info=parts[0].info, tasks=tasks, simulations=simulations)


def _worker(request: dict[str, Any]) -> int:
    """A shard: an ordinary evaluation of its tasks (settings and token as the parent gave)."""
    from tau2_a2a.client.run import evaluate

    config = RunConfig.model_validate(request["run_config"])
    evaluate(config, A2AConfig.from_llm_args(config.llm_args_agent), request["scoring_processes"])
    return 0


if __name__ == "__main__":
    sys.exit(_worker(json.loads(sys.stdin.read())))
