"""Merging: tau2 results files of shards (or of runs with the same settings) as one.

AgentBeats runs an assessment as several shards, each its own results file.
Merged, they are one tau2 results file, scored by tau2 as if one run had made
it (pass^k over every task), with its summary files and one protocol metrics
file beside it. Files that were not made with the same domain, agent, user
and settings are refused, naming what differs, and so are files whose task
sets differ (by the sha256 each records, see `tau2bench.run.provenance`, or by a
task whose content differs between two files), naming both.

A task met in several files keeps all its simulations; trials are numbered
again per task (0, 1, ...), in the order of the files, so pass^k counts each.
"""

from __future__ import annotations

from pathlib import Path

from tau2_a2a.errors import ConfigError, first_line
from tau2_a2a.runner.outcome import format_summary
from tau2_a2a.runner.protocol_metrics import write_metrics
from tau2_a2a.tau2bench.run import provenance
from tau2_a2a.tau2bench.run.layout import results_in, results_path, shown
from tau2_a2a.tau2bench.run.results_file import read_results
from tau2_a2a.tau2bench.run.runs import save_results
from tau2_a2a.tau2bench.seam.distribution import Results, Task

# What must be equal for simulations to be scored together (the seed and git commit may differ).
SETTINGS = {
    "domain": lambda info: info.environment_info.domain_name,
    "agent": lambda info: info.agent_info.implementation,
    "agent llm": lambda info: info.agent_info.llm,
    "agent llm_args": lambda info: info.agent_info.llm_args,
    "user": lambda info: info.user_info.implementation,
    "user llm": lambda info: info.user_info.llm,
    "user llm_args": lambda info: info.user_info.llm_args,
    "max_steps": lambda info: info.max_steps,
    "max_errors": lambda info: info.max_errors,
}


def differences(parts: list[tuple[Path, Results]]) -> list[str]:
    """Each setting on which the files disagree, with every file's value."""
    found = []
    for name, read in SETTINGS.items():
        values = [read(results.info) for _, results in parts]
        if any(value != values[0] for value in values[1:]):
            listed = "; ".join(f"{shown(path)}: {value!r}" for (path, _), value in zip(parts, values))
            found.append(f"{name} differs ({listed})")
    return found


def task_set_differences(parts: list[tuple[Path, Results]]) -> list[str]:
    """Each pair of files whose task sets differ: by their recorded sha256, or by a task's content."""
    found = []
    recorded = [(path, provenance.read(path)) for path, _ in parts]
    known = [(path, record) for path, record in recorded if record]
    for path, record in known[1:]:
        first_path, first = known[0]
        if record.get("task_set_sha256") != first.get("task_set_sha256"):
            found.append(f"task sets differ ({shown(first_path)}: {provenance.describe(first)}; "
                         f"{shown(path)}: {provenance.describe(record)})")
    if found:
        return found
    seen: dict[str, tuple[Path, dict[str, object]]] = {}
    for path, results in parts:
        for task in results.tasks:
            dumped = task.model_dump(mode="json")
            first_path, first = seen.setdefault(str(task.id), (path, dumped))
            if first != dumped:
                return [f"task {task.id} differs between {shown(first_path)} and {shown(path)}, so their task sets "
                        "differ"]
    return found


def merge_results(parts: list[tuple[Path, Results]]) -> Results:
    """One Results: the first file's info, every task once, every simulation, trials renumbered per task."""
    differ = differences(parts) + task_set_differences(parts)
    if differ:
        raise ConfigError("These results files were not made with the same settings, so they cannot be "
                          "scored together: " + "; ".join(differ) + ".")
    seen: set[str] = set()
    tasks: dict[str, Task] = {}
    simulations = []
    trials: dict[str, int] = {}
    for path, results in parts:
        for task in results.tasks:
            tasks.setdefault(task.id, task)
        for simulation in sorted(results.simulations, key=lambda s: (str(s.task_id), s.trial or 0)):
            if simulation.id in seen:
                raise ConfigError(f"Simulation {simulation.id} appears twice ({shown(path)} repeats another "
                                  "file's simulations): give each results file once.")
            seen.add(simulation.id)
            trial = trials.get(simulation.task_id, 0)
            trials[simulation.task_id] = trial + 1
            simulations.append(simulation.model_copy(update={"trial": trial}))
    info = parts[0][1].info.model_copy(update={"num_trials": max(trials.values(), default=0)})
    position = {task_id: index for index, task_id in enumerate(tasks)}
    simulations.sort(key=lambda s: (s.trial, position[s.task_id]))
    return Results(timestamp=parts[0][1].timestamp, info=info, tasks=list(tasks.values()),
                   simulations=simulations)


def merge_files(paths: list[Path], save_to: str, results_dir: Path | None = None) -> Path:
    """Merge `paths` (results files, or runs' directories holding one) into the run `save_to` in `results_dir`
    (tau2's data/simulations by default), where `tau2 run --save-to` would write it (see `layout`), with its
    summary and metrics files; its path."""
    if len(paths) < 2:
        raise ConfigError("Give two or more results files to merge.")
    paths = [results_in(path) for path in paths]
    for path in paths:
        if not path.is_file():
            raise ConfigError(f"No results file at {path}.")
    target = results_path(save_to, results_dir)
    if target.resolve() in {path.resolve() for path in paths}:  # before `exists`: an input always exists
        raise ConfigError(f"--save-to would overwrite the input {target}.")
    if target.exists():
        raise ConfigError(f"{target} exists already; choose another --save-to or remove it.")
    parts = []
    for path in paths:
        try:
            parts.append((path, read_results(path)))
        except (ValueError, OSError) as error:
            raise ConfigError(f"{path} is not a tau2 results file ({first_line(error)}).") from None
    merged = merge_results(parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    save_results(merged, target)
    record = next((found for found in (provenance.read(path) for path in paths) if found), None)
    if record is not None:
        provenance.record(target, record)
    print(format_summary(write_metrics(target)))
    return target
