"""One evaluation in several processes, merged into one tau2 results file.

tau2 runs simulations in threads of one interpreter, and its own work per
simulation (building and hashing the domain database) is CPU-bound Python: at
high concurrency one core under the GIL becomes the limit, and the A2A event
loop waits behind it. Shards spread the tasks over worker processes, each an
ordinary evaluation of its share; the parent merges their results into the
file tau2 would have written, with tau2's own summary files and our metrics.

Workers fork with tau2 already imported: from this process when it runs no
other thread (the CLI), else from the run's fork server (see `processes`).
So they start in milliseconds, get the settings and the token in memory or
through a pipe (never the command line or the environment), and exit if the
run is killed. The task split is saved before they start: re-running with
the same --save-to resumes each worker's part where it stopped. On Ctrl-C the
workers end at once (each part is whole after every write) and the parent
merges what they finished into the results file, with its metrics.
"""

from __future__ import annotations

import json
import math
import os
import sys
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from tau2.data_model.simulation import Results, RunConfig
from tau2.run import get_tasks

from tau2_a2a.runner.results_file import atomic_open
from tau2_a2a.client.errors import RunStopped
from tau2_a2a.runner.interrupt import EXIT_INTERRUPTED, RunInterrupted, end_at_once_on_sigint, pass_on_to
from tau2_a2a.runner.resume import refuse_changed_resume
from tau2_a2a.runner.merge import save_results
from tau2_a2a.client.metrics import metrics_path, write_report
from tau2_a2a.runner.processes import (exit_with, helpers_worth_starting, processes_phrase, usable_cores,
                                       worker_context)
from tau2_a2a.runner.run import RunOutcome, evaluate, prepare_a2a_run, scrub_secrets
from tau2_a2a.runner.scoring import default_scoring_processes, scoring_in_processes
from tau2_a2a.client.pool import sessions
from tau2_a2a.config import A2AConfig, ConfigError

PLAN_FILE = "shards.json"
SIMULATIONS_PER_WORKER = 16
REFUSED_EXIT = 2  # a worker's exit code when the agent refused our credentials (RunStopped)


class ShardFailed(RuntimeError):
    """A worker process failed; what it finished is kept for the next run."""


def default_workers(config: RunConfig, results_path: Path) -> int:
    """Worker processes for a run that does not say: one per 16 simulations at once, at most one per core.

    Above about 16 simulations in threads of one interpreter, tau2's own CPU
    work (building environments, pydantic, under one interpreter lock) delays
    the replies the A2A client threads are waiting to read. A resume keeps how the
    run started: its workers' split, or one process. Small runs stay in one
    process (see `helpers_worth_starting`).
    """
    started = started_shards(results_path)
    if started is not None:
        return len(started)
    if results_path.exists() or not helpers_worth_starting(config):
        return 1
    return max(1, min(usable_cores(), config.max_concurrency // SIMULATIONS_PER_WORKER))


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
    parts_dir = shards_dir(path)
    shards = plan_shards(path, ids, workers)
    for index in range(len(shards)):  # the split checked the tasks; the parts' other settings are checked here
        refuse_changed_resume(config, parts_dir / f"part{index}.json", compare_tasks=False)
    if scoring_processes is None:
        scoring_processes = default_scoring_processes(config)
    concurrency = math.ceil(config.max_concurrency / len(shards))
    scoring = math.ceil(scoring_processes / len(shards))
    print(
        f"Workers: {processes_phrase(len(shards))}, each running up to {concurrency} simulations at once and "
        "scoring "
        + (f"them in {processes_phrase(scoring)} of its own" if scoring else "them itself"))
    sessions.close_all()  # the card check's: the workers open their own, and this process may then fork
    context = worker_context()
    children = [_start(context, config, shard, parts_dir, index, concurrency, scoring, a2a)
                for index, shard in enumerate(shards)]
    pass_on_to([child.pid for child in children if child.pid is not None])
    try:
        for child in children:
            child.join()
    except KeyboardInterrupt:
        raise _interrupted(children, parts_dir, tasks, path) from None
    exit_codes = [child.exitcode for child in children]
    if EXIT_INTERRUPTED in exit_codes:  # a worker got the Ctrl-C alone
        raise _interrupted(children, parts_dir, tasks, path)
    if REFUSED_EXIT in exit_codes:
        raise RunStopped(
            f"The agent at {a2a.endpoint} refused our credentials mid-run, so the run stopped; the finished "
            f"simulations are kept in {parts_dir}. Pass a valid bearer token with --a2a-auth-token or "
            "TAU2_A2A_AUTH_TOKEN and re-run the same command to resume."
        )
    failed = [(index, code) for index, code in enumerate(exit_codes) if code != 0]
    if failed:
        raise ShardFailed(
            f"worker(s) {', '.join(f'{i} (exit {c})' for i, c in failed)} failed (see above); their "
            f"finished simulations are kept in {parts_dir}. Re-run the command to resume."
        )
    merged = _merge([Results.load(parts_dir / f"part{k}.json") for k in range(len(shards))], tasks)
    save_results(merged, path)
    scrub_secrets(path)
    report = write_report(path)
    return RunOutcome(merged, path, metrics_path(path), report)


def shards_dir(results_path: Path) -> Path:
    """Where the workers of the run saving to `results_path` keep their parts, and the task split."""
    return results_path.parent / f"{results_path.stem}_shards"


def started_shards(results_path: Path) -> list[list[str]] | None:
    """The task split of a run over workers that saved (or is saving) to `results_path`; None if none."""
    plan = shards_dir(results_path) / PLAN_FILE
    return json.loads(plan.read_text())["task_ids"] if plan.exists() else None


def plan_shards(results_path: Path, ids: list[str], workers: int) -> list[list[str]]:
    """Which tasks each worker runs: on a resume, the split the run started with, whatever `workers` says now.

    The split is saved before any worker starts, so a re-run finds every
    worker's finished simulations where that worker left them.
    """
    started = started_shards(results_path)
    if started is not None:
        if sorted(task for shard in started for task in shard) != sorted(ids):
            raise ConfigError(
                f"{results_path} was started on other tasks; use another --save-to, or delete it and "
                f"{shards_dir(results_path)} to start over."
            )
        if len(started) != workers:
            print(f"Resuming over the {len(started)} workers the run started with.")
        return started
    if results_path.exists():
        raise ConfigError(
            f"{results_path} holds a run started in one process; resume it with --a2a-workers 1, "
            "or use another --save-to."
        )
    shards = [ids[k::workers] for k in range(min(workers, len(ids)))]
    shards_dir(results_path).mkdir(parents=True, exist_ok=True)
    with atomic_open(shards_dir(results_path) / PLAN_FILE, "w") as plan:
        json.dump({"task_ids": shards}, plan)
    return shards


def _start(context: BaseContext, config: RunConfig, shard: list[str], parts_dir: Path, index: int,
           concurrency: int, scoring_processes: int, a2a: A2AConfig) -> BaseProcess:
    part = config.model_copy(update={
        "task_ids": shard, "num_tasks": None, "results_dir": str(parts_dir), "save_to": f"part{index}",
        "max_concurrency": concurrency,
    })
    child = context.Process(target=_work, name=f"shard-{index}",
                                     args=(part.model_dump(mode="json"), a2a, scoring_processes, os.getpid()))
    child.start()
    return child


def _merge(parts: list[Results], tasks: list[Any]) -> Results:
    """One Results: the first part's info, every task of the run in its order, every simulation."""
    position = {task.id: index for index, task in enumerate(tasks)}
    simulations = sorted((sim for part in parts for sim in part.simulations),
                         key=lambda sim: (sim.trial or 0, position[sim.task_id]))
    return Results(timestamp=parts[0].timestamp, info=parts[0].info, tasks=tasks, simulations=simulations)


def _interrupted(children: list[BaseProcess], parts_dir: Path, tasks: list[Any], path: Path) -> RunInterrupted:
    """Ctrl-C: the workers end at once; what they finished becomes the results file and its metrics."""
    for child in children:
        child.join(timeout=5)
        if child.is_alive():
            child.kill()
            child.join()
    parts = [Results.load(part) for part in sorted(parts_dir.glob("part*.json")) if part.stem[4:].isdigit()]
    if not any(part.simulations for part in parts):
        return RunInterrupted(0, path, None)
    save_results(_merge(parts, tasks), path)
    scrub_secrets(path)
    report = write_report(path)
    return RunInterrupted(len(report["simulations"]), path, metrics_path(path))


def _work(run_config: dict[str, Any], a2a: A2AConfig, scoring_processes: int, parent_pid: int) -> None:
    """A shard: an ordinary evaluation of its tasks, with the settings and token the parent gave."""
    end_at_once_on_sigint()  # the parent keeps and reports what this worker finished
    # Fork the scoring workers first, while this process (just forked, tau2 imported) has one thread.
    with scoring_in_processes(scoring_processes, worker_context()):
        exit_with(parent_pid)
        try:
            evaluate(RunConfig.model_validate(run_config), a2a, scoring_processes)
        except RunStopped as stopped:
            print(f"error: {stopped}", file=sys.stderr)
            sys.exit(REFUSED_EXIT)
