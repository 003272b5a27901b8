"""Run a tau2 evaluation of an A2A agent: discover, run tau2's run_domain, report.

Used by `tau2-a2a run` and by the evaluation service, so both behave alike:
the card is checked before any simulation, the results file and its protocol
metrics file sit side by side, an existing results file of a run with the same
settings is resumed without a prompt (one of another run is refused, see
`resume`), and no secret is left in the results.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from tau2.data_model.simulation import Results, RunConfig
from tau2.run import make_run_name, run_domain
from tau2.utils.display import ConsoleDisplay
from tau2.utils.utils import DATA_DIR

from tau2_a2a.client.agent import AGENT_NAME
from tau2_a2a.client.errors import AgentAuthError, RunStopped
from tau2_a2a.client.metrics import metrics_path, write_report
from tau2_a2a.runner.interrupt import RunInterrupted, freeze_writes
from tau2_a2a.runner.resume import CARD_KEY, refuse_changed_resume
from tau2_a2a.runner.results_file import atomic_open
from tau2_a2a.runner.scoring import default_scoring_processes, refuse_script_rerun, scoring_in_processes
from tau2_a2a.client.pool import sessions
from tau2_a2a.config import A2AConfig, ConfigError
from tau2_a2a.tau2bench.environments import install as install_environments

log = logging.getLogger("tau2_a2a.client")
REDACTED = "***"
_SECRET_KEYS = ("api_key", "auth_token", "token", "password")


@dataclass
class RunOutcome:
    results: Results
    results_path: Path
    metrics_path: Path | None
    report: dict[str, Any] | None


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


def agent_model_name(card_name: str) -> str:
    """A run-name-safe label for the agent under test (tau2 names runs after the agent's LLM)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", card_name).strip("-") or "agent"
    return f"a2a-{slug}"


def discover(a2a: A2AConfig) -> Any:
    """Fetch and validate the agent card; raises an A2AFailure saying what to do."""
    return sessions.get(a2a).card


def prepare_a2a_run(config: RunConfig, a2a: A2AConfig) -> Path:
    """Point `config` at the A2A agent (no secret in llm_args), check the agent, name the results file,
    and refuse to resume a results file of another run."""
    config.agent = AGENT_NAME
    card = discover(a2a)
    config.llm_args_agent = {**(config.llm_args_agent or {}), **a2a.to_llm_args(), CARD_KEY: card_identity(card)}
    config.agent_api_key = None
    if config.llm_args_judge is None:
        config.llm_args_judge = {}
    path = results_path_for(config)
    refuse_changed_resume(config, path)
    return path


def card_identity(card: Any) -> dict[str, str]:
    """Who answered: the card's name, its url (first interface's) and version, kept with the results."""
    interfaces = list(card.supported_interfaces)  # never empty: see validate_card
    return {"name": card.name, "url": interfaces[0].url if interfaces else "", "version": card.version}


def evaluate(config: RunConfig, a2a: A2AConfig | None = None, scoring_processes: int | None = None) -> RunOutcome:
    """Run `config` with tau2; with `a2a`, evaluate that A2A agent and write its metrics.

    An A2A run scores its simulations in `scoring_processes` worker processes
    (default: see `default_scoring_processes`; 0: in this process). A Ctrl-C
    (see `interrupt`) raises RunInterrupted once what finished is saved.
    """
    install_environments()
    if a2a is None:
        return _evaluate_native(config)
    refuse_script_rerun()
    path = prepare_a2a_run(config, a2a)
    refuse_resume_of_sharded_run(path)
    if scoring_processes is None:
        scoring_processes = default_scoring_processes(config)
    try:
        with resume_without_prompt(path.exists()), scoring_in_processes(scoring_processes):
            results = run_domain(config)
    except AgentAuthError as refusal:
        raise stopped_by_refusal(refusal, a2a, path) from None
    except KeyboardInterrupt:
        raise interrupted(path) from None
    scrub_secrets(path)
    report = write_report(path)
    return RunOutcome(results, path, metrics_path(path), report)


def _evaluate_native(config: RunConfig) -> RunOutcome:
    """A tau2 agent run as `tau2 run` would, resuming only a run with the same settings, without a prompt."""
    path = results_path_for(config)
    refuse_changed_resume(config, path)
    try:
        with resume_without_prompt(path.exists()):
            results = run_domain(config)
    except KeyboardInterrupt:
        raise interrupted(path, metrics=False) from None
    return RunOutcome(results, path, None, None)


def interrupted(path: Path, metrics: bool = True) -> RunInterrupted:
    """The run stopped by Ctrl-C: freeze its results file and write the metrics of what it holds."""
    freeze_writes()
    if not path.exists():
        return RunInterrupted(0, path, None)
    scrub_secrets(path)
    if not metrics:
        return RunInterrupted(len(json.loads(path.read_text())["simulations"]), path, None)
    report = write_report(path)
    return RunInterrupted(len(report["simulations"]), path, metrics_path(path))


def stopped_by_refusal(refusal: AgentAuthError, a2a: A2AConfig, path: Path) -> RunStopped:
    """The run stopped when the agent refused our credentials: keep what finished, say what to pass."""
    finished = 0
    if path.exists():
        scrub_secrets(path)
        finished = len(write_report(path)["simulations"])
    return RunStopped(
        f"The agent at {a2a.endpoint} refused our credentials mid-run "
        f"({f'HTTP {refusal.status}' if refusal.status else 'gRPC UNAUTHENTICATED'}), so the run stopped; its {finished} finished simulations are kept in {path}. Pass a valid bearer token with "
        "--a2a-auth-token or TAU2_A2A_AUTH_TOKEN and re-run the same command to resume.",
        status=refusal.status,
    )


def refuse_resume_of_sharded_run(path: Path) -> None:
    """A run over workers resumes over workers: its finished simulations are in their parts, not at `path`."""
    from tau2_a2a.runner.shards import started_shards  # shards builds on this module

    started = started_shards(path)
    if started is not None:
        raise ConfigError(
            f"The run saving to {path} was started over {len(started)} worker processes and its finished "
            f"simulations are in their parts; re-run it with --a2a-workers {len(started)}, or without the "
            "flag, to resume."
        )


_prompt_lock = threading.Lock()


@contextmanager
def resume_without_prompt(resuming: bool) -> Iterator[None]:
    """tau2 asks on the terminal before resuming an existing results file; answer yes."""
    if not resuming:
        yield
        return
    console = ConsoleDisplay.console
    with _prompt_lock:
        original = console.input
        console.input = lambda *args, **kwargs: "y"  # type: ignore[method-assign]
        try:
            yield
        finally:
            console.input = original  # type: ignore[method-assign]


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
