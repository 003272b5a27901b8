"""The service's settings: from `tau2-a2a serve` flags (cli/serve.py), or from the environment.

`adk web` / `adk api_server` import the agent with no flags, so the same
settings are read from TAU2_EVAL_* environment variables there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tau2_a2a.client.config import AgentLimits, ConfigError, McpServing, check_limit, check_timeout, has_userinfo
from tau2_a2a.service.argument_policy import DEFAULT_ALLOWED_USER_LLMS, UserLLMPolicy
from tau2_a2a.service.jobs.child import DEFAULT_NICE, ChildOptions
from tau2_a2a.service.jobs.database import Database, StoreError
from tau2_a2a.service.jobs.errors import EvaluationError
from tau2_a2a.service.jobs.limits import DEFAULT_LIMITS, Limits
from tau2_a2a.service.jobs.manager import EvaluationManager
from tau2_a2a.service.request_limit import DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_REQUEST_BYTES

if TYPE_CHECKING:
    from tau2_a2a.service.tools import EvaluationTools

ENV_PREFIX = "TAU2_EVAL_"
SERVICE_TOKEN_ENV = "TAU2_EVAL_AUTH_TOKEN"  # the bearer token callers must send
DEFAULT_RESULTS_DIR = "tau2_eval_results"
# Globally routable addresses only: callers must not reach, or map by its answers, the operator's own network.
DEFAULT_ALLOWED_TARGETS = ("public",)
EVALUATION_STARTS = ("warm", "cold")  # how each evaluation's process starts (service/jobs/warm.py)
# Each limit an evaluated agent meets (AgentLimits' fields), by the name of its variable after TAU2_EVAL_; its flag
# is that name in lower case with dashes (AGENT_TIMEOUT: --agent-timeout).
AGENT_LIMITS = {"timeout": "AGENT_TIMEOUT", "max_reply_bytes": "AGENT_MAX_REPLY_BYTES",
                "max_tool_calls_per_reply": "AGENT_MAX_TOOL_CALLS_PER_REPLY",
                "max_tool_calls": "AGENT_MAX_TOOL_CALLS", "max_request_bytes": "AGENT_MAX_REQUEST_BYTES",
                "max_mcp_requests": "AGENT_MAX_MCP_REQUESTS", "max_agent_bytes": "AGENT_MAX_AGENT_BYTES"}


def setting_name(variable: str) -> str:
    """How a setting is named in a message: its flag and its environment variable."""
    return f"--{variable.lower().replace('_', '-')} ({ENV_PREFIX}{variable})"


@dataclass(frozen=True)
class ServiceSettings:
    results_dir: Path = Path(DEFAULT_RESULTS_DIR)
    limits: Limits = DEFAULT_LIMITS
    allowed_targets: tuple[str, ...] = DEFAULT_ALLOWED_TARGETS
    model: str | None = None  # any LiteLLM model string; None: structured requests only
    model_api_base: str | None = None  # an OpenAI-compatible endpoint, with model "openai/<name>"
    auth_token: str | None = field(default=None, repr=False)  # bearer token callers must send
    ray_address: str | None = None  # each evaluation's simulations run on this Ray cluster (`run --ray`)
    # Evaluations, queue and A2A tasks: a SQLite file (default: in results_dir) or postgresql://...
    database: str | None = field(default=None, repr=False)  # a URL may hold a password
    replica: str | None = None  # this service's name among replicas (default host:port)
    lease_seconds: float = 30.0  # how long a silent replica keeps its evaluations
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    evaluation_nice: int = DEFAULT_NICE  # evaluations run this many nice steps below the service
    evaluation_start: str = "warm"  # warm: forked from the fork server, which has tau2 imported; cold: a new process
    # The user LLMs callers may choose, and the endpoint the evaluations reach them at (None: the provider's).
    allowed_user_llms: tuple[str, ...] = DEFAULT_ALLOWED_USER_LLMS
    user_llm_api_base: str | None = None
    agent_limits: AgentLimits = AgentLimits()  # what each evaluated agent may take of its run
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES  # a larger message is refused, and kept only in part
    # Where an evaluation of the MCP tools modes serves the tools (a free port each), and the host name the
    # evaluated agents reach it by (None: MCP_HOST, or its address). The operator's, never a caller's.
    mcp_host: str = McpServing.host
    mcp_public_host: str | None = None
    mcp_max_connections: int = McpServing.max_connections  # each evaluation's MCP server's bounds
    mcp_read_timeout: float = McpServing.read_timeout

    def __post_init__(self) -> None:
        for field_name, variable in AGENT_LIMITS.items():
            value = getattr(self.agent_limits, field_name)
            if field_name == "timeout":
                check_timeout(value, setting_name(variable))
            else:
                check_limit(value, setting_name(variable))
        check_limit(self.max_message_bytes, setting_name("MAX_MESSAGE_BYTES"))
        check_limit(self.mcp_max_connections, setting_name("MCP_MAX_CONNECTIONS"))
        check_timeout(self.mcp_read_timeout, setting_name("MCP_READ_TIMEOUT"))
        if self.evaluation_start not in EVALUATION_STARTS:
            raise ConfigError(f"{setting_name('EVALUATION_START')} is warm or cold, got {self.evaluation_start!r}.")

    def user_llm_policy(self) -> UserLLMPolicy:
        """The user LLM policy, or ConfigError naming the setting that is wrong."""
        if self.user_llm_api_base is not None and has_userinfo(self.user_llm_api_base):
            raise ConfigError("--user-llm-api-base (TAU2_EVAL_USER_LLM_API_BASE) must not carry a user name or "
                              "password: it is written to each evaluation's results. Use the provider's key "
                              "variable (e.g. OPENAI_API_KEY).")
        try:
            return UserLLMPolicy(tuple(name.strip() for name in self.allowed_user_llms), self.user_llm_api_base)
        except ValueError as error:
            raise ConfigError(str(error)) from None

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> ServiceSettings:
        def get(name: str) -> str | None:
            value = env.get(ENV_PREFIX + name, "").strip()
            return value or None

        def number(name: str, default: int) -> int:
            raw = get(name)
            if raw is None:
                return default
            try:
                return int(raw)
            except ValueError:
                raise ConfigError(f"{ENV_PREFIX}{name} must be a whole number, got {raw!r}.") from None

        def decimal(name: str, default: float) -> float:
            raw = get(name)
            try:
                value = default if raw is None else float(raw)
            except ValueError:
                value = -1.0
            if value <= 0:
                raise ConfigError(f"{ENV_PREFIX}{name} must be a positive number, got {raw!r}.")
            return value

        def seconds(name: str, default: float) -> float:
            raw = get(name)
            try:
                return default if raw is None else float(raw)
            except ValueError:
                raise ConfigError(f"{ENV_PREFIX}{name} must be a number of seconds, got {raw!r}.") from None

        agent_defaults = AgentLimits()
        limit_values: dict[str, Any] = {  # Any: seconds (a float) for timeout, whole numbers for the rest
            field_name: seconds(variable, agent_defaults.timeout) if field_name == "timeout"
            else number(variable, getattr(agent_defaults, field_name))
            for field_name, variable in AGENT_LIMITS.items()}
        agent_limits = AgentLimits(**limit_values)
        defaults = Limits()
        try:
            limits = Limits(
                max_running=number("MAX_RUNNING", defaults.max_running),
                max_queued=number("MAX_QUEUED", defaults.max_queued),
                max_simulations=number("MAX_SIMULATIONS", defaults.max_simulations),
                max_concurrency=number("MAX_CONCURRENCY", defaults.max_concurrency),
            )
        except EvaluationError as error:
            raise ConfigError(str(error)) from None
        return cls(
            results_dir=Path(get("RESULTS_DIR") or DEFAULT_RESULTS_DIR),
            limits=limits,
            allowed_targets=names(get("ALLOWED_TARGETS")) or DEFAULT_ALLOWED_TARGETS,
            model=get("MODEL"),
            model_api_base=get("MODEL_API_BASE"),
            auth_token=env.get(SERVICE_TOKEN_ENV) or None,
            ray_address=get("RAY_ADDRESS"),
            database=get("DATABASE"),
            replica=get("REPLICA"),
            lease_seconds=decimal("LEASE_SECONDS", cls.lease_seconds),
            max_request_bytes=int(decimal("MAX_REQUEST_BYTES", cls.max_request_bytes)),
            evaluation_nice=number("EVALUATION_NICE", cls.evaluation_nice),
            evaluation_start=get("EVALUATION_START") or cls.evaluation_start,
            allowed_user_llms=names(get("ALLOWED_USER_LLMS")) or DEFAULT_ALLOWED_USER_LLMS,
            user_llm_api_base=get("USER_LLM_API_BASE"),
            agent_limits=agent_limits,
            max_message_bytes=number("MAX_MESSAGE_BYTES", cls.max_message_bytes),
            mcp_host=get("MCP_HOST") or cls.mcp_host,
            mcp_public_host=get("MCP_PUBLIC_HOST"),
            mcp_max_connections=number("MCP_MAX_CONNECTIONS", cls.mcp_max_connections),
            mcp_read_timeout=seconds("MCP_READ_TIMEOUT", cls.mcp_read_timeout),
        )

    def mcp_serving(self) -> McpServing:
        """Where each evaluation's MCP tools server listens, and its connections' bounds."""
        return McpServing(host=self.mcp_host, public_host=self.mcp_public_host,
                          max_connections=self.mcp_max_connections, read_timeout=self.mcp_read_timeout)

    def tools(self, replica: str | None = None) -> EvaluationTools:
        """The tools over an evaluation manager for these settings, not started: nothing is opened or run
        until `manager.start()` (the app's lifespan calls it). ConfigError naming the setting that is wrong."""
        from tau2_a2a.client.targets import SERVICE_FLAG, TargetPolicy
        from tau2_a2a.service.tools import EvaluationTools

        user_llms = self.user_llm_policy()
        targets = TargetPolicy.from_entries(self.allowed_targets, flag=SERVICE_FLAG)
        try:
            children = ChildOptions(nice=self.evaluation_nice, warm=self.evaluation_start == "warm",
                                    ray_address=self.ray_address,
                                    user_llm_api_base=user_llms.api_base, allowed_targets=targets.entries,
                                    agent_limits=self.agent_limits,
                                    mcp=self.mcp_serving())
            database = Database(self.database) if self.database else None  # None: SQLite in results_dir
            manager = EvaluationManager(self.results_dir, self.limits, database=database, children=children,
                                        replica=replica or self.replica, lease_seconds=self.lease_seconds)
        except (StoreError, EvaluationError) as error:
            raise ConfigError(str(error)) from None
        return EvaluationTools(manager, targets, user_llms=user_llms)


def names(value: str | None) -> tuple[str, ...]:
    """A comma-separated list of names (model names, hosts), blanks dropped."""
    return tuple(name.strip() for name in (value or "").split(",") if name.strip())
