"""An evaluation request, declared once: `run_tau2_evaluation`'s arguments as one typed value.

Each argument is a field of EvaluationRequest, and the field declares all the
service says of it (`arguments.argument`): its kind, bounds, default and
description. From there come its JSON Schema (the card shows it, and the
service's model is offered it as the tool's parameters), the check of its
value and its default in `check_request`, the AgentBeats config key of the
same name (`assessment`), and the RunSettings field it sets (`run_settings`).
A new argument is one new field here: `argument(kind, description, default)`,
plus `accepts=` for the AgentBeats refusal's words unless its kind has them,
and `setting=` when the RunSettings field it sets is not of its name (None:
it shapes the A2A client instead, and `run_settings` hands it on).

`check_request` turns the arguments a caller sent into an EvaluationRequest,
or refuses the first bad one in one line that names it and the accepted
values: each argument alone first, in the card's order, then how they fit
together (the domain's tasks and splits, the user LLM for the user, ...).

Importing this module imports no tau2 (seconds of CPU): the domain names and
tasks are read from it when a request is checked, and the run made of it.

The request holds no secret: it is stored and shown as it is. The target's
bearer token travels beside it (TOKEN_ARGUMENT), never inside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tau2_a2a.client.config import TOOLS_MODES, A2AConfig, AgentLimits, McpServing
from tau2_a2a.client.targets import TargetPolicy
from tau2_a2a.service.argument_policy import ArgumentRefused
from tau2_a2a.service.arguments import (
    Choice,
    Endpoint,
    Flag,
    OfDomain,
    PriceModel,
    RequestPolicy,
    RetrievalConfig,
    SamplingArgs,
    TaskIds,
    UserLLM,
    Whole,
    argument,
    declared,
    default_of,
    is_argument,
    required,
)
from tau2_a2a.service.shard import Shard
from tau2_a2a.service.wire import JsonObject
from tau2_a2a.tau2bench.seam.defaults import (
    DEFAULT_LLM_TEMPERATURE_USER,
    DEFAULT_LLM_USER,
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_STEPS,
    DEFAULT_NUM_TRIALS,
    DEFAULT_USER_IMPLEMENTATION,
)

if TYPE_CHECKING:
    from dataclasses import Field

    from tau2_a2a.runner.settings import RunSettings

__all__ = ["TOKEN_ARGUMENT", "EvaluationRequest", "RequestPolicy", "check_request", "request_schema"]

# Steps per simulation at most: tau2's default (200), which its leaderboard runs use. The oracle needs at most 37
# agent turns on any task of tau2-bench v1.0.1 (README "Limits"); every step may cost an LLM call of the user
# simulator on the operator's keys, so a caller may ask for fewer steps, not more.
MAX_STEPS = DEFAULT_MAX_STEPS
MAX_NUM_TASKS = 100_000  # more than any domain has: a bigger number is a mistake, not a request
TOKEN_ARGUMENT = "agent_auth_token"
TOKEN_SCHEMA: JsonObject = {"type": "string", "writeOnly": True,
                                "description": "Bearer token the target agent needs. Never echoed, logged or stored."}


def derived(default: Any = MISSING) -> Any:
    """A field the service fills in (not an argument a caller sends)."""
    return field(default=default)


def _domains(policy: RequestPolicy) -> list[str]:
    from tau2_a2a.service import catalog  # imports tau2: when a request is checked or the card made

    return catalog.domain_names()


def _users(policy: RequestPolicy) -> list[str]:
    from tau2_a2a.service import catalog

    return catalog.user_names()


_SAMPLING_DEFAULT = {"temperature": DEFAULT_LLM_TEMPERATURE_USER}


@dataclass(frozen=True, kw_only=True)
class EvaluationRequest:
    """A checked evaluation request: complete (defaults filled in), and free of secrets."""

    domain: str = argument(Choice(_domains, "Unknown domain {value!r}. Accepted domains: {choices}."),
                           "tau2 domain.", accepts="a tau2 domain name (required)")
    agent_endpoint: str = argument(Endpoint(), "Base URL of the A2A agent to evaluate.", accepts="", setting=None)
    user_llm: str = argument(
        UserLLM(), "LiteLLM model of the user simulator, one this service allows (not used by scripted_user, "
                   "which needs no LLM).", DEFAULT_LLM_USER,
        accepts=f"a LiteLLM model name the service allows (default: the service's, usually {DEFAULT_LLM_USER})")
    user_llm_args: JsonObject = argument(
        SamplingArgs(), "Sampling parameters of the user LLM. Its endpoint, headers and keys are the service's, "
                        "never the caller's.", default_factory=lambda: dict(_SAMPLING_DEFAULT),
        accepts="a JSON object of the user LLM's sampling parameters (temperature, top_p, ...)")
    user: str = argument(Choice(_users, "Unknown user {value!r}. Accepted users: {choices}."),
                         "user_simulator (LLM), or scripted_user for the offline self-test.",
                         DEFAULT_USER_IMPLEMENTATION,
                         accepts=f"a tau2 user: {DEFAULT_USER_IMPLEMENTATION} or scripted_user")
    num_trials: int = argument(Whole(1, lambda policy: policy.limits.max_simulations), "Trials per task.",
                               DEFAULT_NUM_TRIALS)
    num_tasks: int | None = argument(Whole(1, MAX_NUM_TASKS), "The first N tasks of the split.", None)
    task_ids: list[str] | None = argument(TaskIds(), "Only these tasks (ids of the split).", None,
                                          accepts="a non-empty list of task ids")
    task_split: str | None = argument(OfDomain(), "A split of the domain (see list_domains); default base.", None,
                                      accepts="a task split name of the domain", setting="task_split_name")
    max_steps: int = argument(Whole(1, MAX_STEPS), "Steps per simulation at most.", DEFAULT_MAX_STEPS)
    max_concurrency: int = argument(Whole(1, lambda policy: policy.limits.max_concurrency),
                                    "Simulations at once.", DEFAULT_MAX_CONCURRENCY)
    retrieval_config: str | None = argument(
        RetrievalConfig(), "banking_knowledge only: how the agent searches its knowledge base, by name (no "
        "arguments). Default: tau2's (alltools, which computes OpenAI embeddings and runs a sandbox). bm25_grep, "
        "bm25, grep_only, full_kb, golden_retrieval and no_knowledge need neither. Needs upstream tau2-bench "
        "v1.0.1.", None, accepts="a retrieval config name of banking_knowledge, e.g. bm25_grep (default: tau2's)")
    agent_tools: str = argument(
        Choice(lambda policy: TOOLS_MODES, "{name} must be one of {choices}, got {value!r}."),
        "How the agent gets the domain's tools: in the messages (message), over MCP from this service's tools "
        "server, named in each conversation's first message (mcp), or as the agent's card asks (auto: mcp when "
        "it declares the MCP tools extension). See docs/mcp-tools.md.", "message",
        accepts="how the agent gets its tools: message, mcp or auto (default message)", setting=None)
    agent_driven: bool = argument(
        Flag(), "The agent drives: one A2A task per simulation, the tools and the user (the send_message_to_user "
                "tool) over MCP.", False,
        accepts="true or false: the agent drives the conversation over MCP (default false)", setting=None)
    agent_price_model: str | None = argument(
        PriceModel(), "The LiteLLM model whose price applies when the agent reports tokens but no cost and no "
                      "model LiteLLM prices (e.g. gpt-4.1-2025-04-14); without it such turns cost 'not reported'.",
        None, accepts="a LiteLLM model name that prices tokens the agent reports without a cost", setting=None)
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
                    if (setting := declared(item).setting) and getattr(self, item.name) is not None}
        settings["user_llm_args"] = {**self.user_llm_args,
                                     **({"api_base": user_llm_api_base} if user_llm_api_base else {})}
        targets = TargetPolicy.from_entries(allowed_targets) if allowed_targets else None
        from tau2_a2a.runner.settings import RunSettings  # imports tau2: only where a run is made

        return RunSettings(**settings, a2a=A2AConfig.limited(
            self.agent_endpoint, agent_limits, targets=targets, driven=self.agent_driven, mcp=mcp,
            tools="mcp" if self.agent_driven and self.agent_tools == "message" else self.agent_tools,
            price_model=self.agent_price_model), ray=ray,
                           results_dir=str(results_dir), save_to=save_to)


def arguments() -> list[Field[Any]]:
    """The fields a caller sends, in the order the card and refusals list them."""
    return [item for item in fields(EvaluationRequest) if is_argument(item)]


def argument_schema(item: Field[Any], policy: RequestPolicy) -> JsonObject:
    """One argument's JSON Schema under `policy`: its kind's, its default there (if it has one), its words."""
    spec = declared(item)
    default = spec.kind.default(default_of(item), policy)
    return {**spec.kind.schema(policy), **({"default": default} if default is not None else {}),
            "description": spec.description}


def request_schema(policy: RequestPolicy) -> JsonObject:
    """The JSON Schema of run_tau2_evaluation's arguments under `policy`, the target's token among them."""
    properties = {item.name: argument_schema(item, policy) for item in arguments()}
    properties[TOKEN_ARGUMENT] = dict(TOKEN_SCHEMA)
    return {"type": "object", "properties": properties, "required": [item.name for item in arguments()
                                                                       if required(item)],
            "additionalProperties": False}


# -- the checks ----------------------------------------------------------------------------------------

def _checked(item: Field[Any], sent: object, policy: RequestPolicy) -> Any:
    """One argument as sent (None: not sent), its default filled in, checked by its kind."""
    kind = declared(item).kind
    value = kind.default(default_of(item), policy) if sent is None else sent
    return None if value is None and not required(item) else kind.check(item.name, value, policy)


def _choices(values: list[str] | tuple[str, ...], limit: int = 12) -> str:
    shown = ", ".join(values[:limit])
    return shown + (f", ... ({len(values)} in all)" if len(values) > limit else "")


def _retrieval_config(domain: str, name: Any) -> str | None:  # name: as sent, its kind checked
    """A retrieval config name for banking_knowledge that the installed tau2 knows, or None for its default.
    By name only: its arguments (which could name an endpoint for the service's keys) are the operator's."""
    from tau2_a2a.tau2bench.seam.distribution import KNOWLEDGE_DOMAIN, retrieval_config_names

    if name is None:
        return None
    if domain != KNOWLEDGE_DOMAIN:
        raise ArgumentRefused(f"retrieval_config applies to the {KNOWLEDGE_DOMAIN} domain only; leave "
                              f"retrieval_config out for {domain}.")
    known = retrieval_config_names()
    if name not in known:
        raise ArgumentRefused(f"retrieval_config is none of the accepted retrieval configs: {', '.join(known)}.")
    return name


def _selection(domain: str, task_split: Any, task_ids: list[str] | None, num_tasks: int | None) -> list[str]:
    """The tasks of the domain's split the request selects, in the split's order."""
    from tau2_a2a.service import catalog

    splits = catalog.splits(domain)
    if task_split is not None:
        if not splits:
            raise ArgumentRefused(f"Domain {domain} has no task splits; leave task_split out.")
        if task_split not in splits:
            raise ArgumentRefused(f"Unknown task_split {task_split!r} for {domain}. "
                                  f"Accepted splits: {', '.join(sorted(splits))}.")
    available = catalog.task_ids(domain, task_split)
    selected = list(available)
    if task_ids is not None:
        unknown = [t for t in task_ids if t not in set(available)]
        if unknown:
            raise ArgumentRefused(f"Unknown task_ids for {domain} ({task_split or 'default'} split): "
                                  f"{', '.join(unknown[:10])}. Accepted task ids: {_choices(available)}.")
        wanted = set(task_ids)
        selected = [t for t in available if t in wanted]
    return selected if num_tasks is None else selected[:num_tasks]


# sent: the caller's JSON arguments, each one checked here before it is used.
def check_request(sent: Mapping[str, Any], policy: RequestPolicy, shard: Shard | None = None) -> EvaluationRequest:
    """The EvaluationRequest `sent` asks for (of `shard`'s part of the tasks), or ArgumentRefused naming the
    first bad argument. `sent` holds arguments of run_tau2_evaluation only; a missing one takes its default."""
    values = {item.name: _checked(item, sent.get(item.name), policy) for item in arguments()}
    domain, num_trials = values["domain"], values["num_trials"]
    values["retrieval_config"] = _retrieval_config(domain, values["retrieval_config"])
    values["user_llm"] = policy.user_llms.check(values["user"], values["user_llm"])
    selected = _selection(domain, values["task_split"], values["task_ids"], values["num_tasks"])
    if shard is not None and shard.count > 1:
        selection = len(selected)
        selected = shard.take(selected)
        if not selected:
            raise ArgumentRefused(f"Shard {shard.index} of {shard.count} has no tasks: the selection has "
                                  f"{selection} task(s); use at most {selection} shard(s).")
        values["task_ids"], values["num_tasks"] = selected, None
    total = len(selected) * num_trials
    limit = policy.limits.max_simulations
    if total > limit:
        raise ArgumentRefused(f"{len(selected)} tasks x {num_trials} trials = {total} simulations exceeds this "
                              f"service's limit of {limit} per request; ask for fewer tasks (num_tasks, task_ids) "
                              "or trials.")
    return EvaluationRequest(**values, total_simulations=total,
                             shard_index=None if shard is None else shard.index,
                             num_shards=None if shard is None else shard.count)
