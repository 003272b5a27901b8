"""The service's five tools as plain functions, with argument checks that say what is wrong.

Used twice, through `call`: by structured requests (`{"tool": name,
"arguments": {...}}`, deterministic, no model) and by the service's model for
text requests (evaluator_agent.py). A tool takes JSON and answers JSON; the
run request it checks is typed (request.py), and so is the evaluation it
answers about (jobs/evaluation.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tau2_a2a.client.targets import TargetPolicy
from tau2_a2a.service import catalog, summary
from tau2_a2a.service.argument_policy import ArgumentRefused, UserLLMPolicy
from tau2_a2a.service.assessment import Assessment, Shard
from tau2_a2a.service.jobs.errors import EvaluationError
from tau2_a2a.service.jobs.evaluation import EvaluationView
from tau2_a2a.service.jobs.manager import EvaluationManager
from tau2_a2a.service.request import TOKEN_ARGUMENT, EvaluationRequest, RequestPolicy, check_request
from tau2_a2a.service.tool_specs import (
    ALIASES,
    CANCEL,
    GET,
    LIST,
    LIST_DOMAINS,
    REFERENCE_ARGUMENT,
    RUN,
    TOOL_NAMES,
    tool_specs,
)
from tau2_a2a.service.vault import TokenVault, vault
from tau2_a2a.service.wire import JsonObject


class ToolError(ValueError):
    """A bad tool call: the message names the argument and the accepted values."""


class EvaluationTools:
    """The five tools over one evaluation manager, under one request policy."""

    def __init__(self, manager: EvaluationManager, targets: TargetPolicy | None = None,
                 token_vault: TokenVault = vault, user_llms: UserLLMPolicy | None = None) -> None:
        self.manager = manager
        self.vault = token_vault
        self.policy = RequestPolicy(manager.limits, user_llms or UserLLMPolicy(), targets or TargetPolicy())
        self.specs = tool_specs(manager.limits, self.policy.user_llms)
        self.public_url: str | None = None  # the service's URL, for each evaluation's report_url

    @property
    def targets(self) -> TargetPolicy:
        return self.policy.targets

    @property
    def user_llms(self) -> UserLLMPolicy:
        return self.policy.user_llms

    def answer(self, view: EvaluationView) -> JsonObject:
        """An evaluation as a tool answers it: its JSON, with the absolute URL of its HTML report when the
        service's URL is known."""
        data = view.to_json()
        if self.public_url is not None:
            from tau2_a2a.service.report import report_url

            data["report_url"] = report_url(self.public_url, view.evaluation_id)
        return data

    # -- structured calls -----------------------------------------------------------

    def call(self, name: object, arguments: object = None) -> JsonObject:
        """Run tool `name` (or an alias) with `arguments`; ToolError says what is wrong."""
        canonical = ALIASES.get(name, name) if isinstance(name, str) else None
        if canonical is None or canonical not in self.specs:
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
            return self.run_tau2_evaluation(arguments, token)
        if canonical == LIST_DOMAINS:
            return self.list_domains()
        if canonical == LIST:
            return self.list_evaluations()
        if canonical == GET:
            return self.get_evaluation(arguments["evaluation_id"])
        assert canonical == CANCEL
        return self.cancel_evaluation(arguments["evaluation_id"])

    # -- the tools -----------------------------------------------------------------

    def list_domains(self) -> JsonObject:
        """The tau2 domains, each with its task count, task splits and tool names."""
        return {"domains": [info.as_dict() for info in catalog.domains()]}

    def run_tau2_evaluation(self, arguments: Mapping[str, Any], token: str | None = None) -> JsonObject:
        """Start evaluating the A2A agent the arguments name; its evaluation."""
        return self._submit(self.check(arguments), token or None).to_json()

    def run_assessment(self, assessment: Assessment) -> EvaluationView:
        """Start the evaluation an AgentBeats assessment asks for (its shard only)."""
        return self._submit(self.check(assessment.arguments, shard=assessment.shard), None)

    def get_evaluation(self, evaluation_id: str) -> JsonObject:
        """Status, progress (or queue position) and results of one evaluation."""
        try:
            return self.answer(self.manager.get(evaluation_id))
        except EvaluationError as error:
            raise ToolError(str(error)) from None

    def list_evaluations(self) -> JsonObject:
        """Every evaluation this service knows, oldest first, briefly."""
        return {"evaluations": [brief(view) for view in self.manager.list()]}

    def cancel_evaluation(self, evaluation_id: str) -> JsonObject:
        """Stop an evaluation; finished simulations are kept."""
        try:
            return self.manager.cancel(evaluation_id).to_json()
        except EvaluationError as error:
            raise ToolError(str(error)) from None

    # -- the request -----------------------------------------------------------------

    def check(self, arguments: Mapping[str, Any], shard: Shard | None = None) -> EvaluationRequest:
        """The EvaluationRequest `arguments` ask for (`shard`'s part of the tasks), or ToolError naming the
        first bad argument."""
        try:
            return check_request(arguments, self.policy, shard)
        except ArgumentRefused as error:
            raise ToolError(str(error)) from None

    def _submit(self, request: EvaluationRequest, token: str | None) -> EvaluationView:
        try:
            return self.manager.submit(request, token=token)
        except EvaluationError as error:
            raise ToolError(str(error)) from None


def brief(view: EvaluationView) -> JsonObject:
    """One line of list_evaluations."""
    record, result = view.record, view.record.result or {}
    return {
        "evaluation_id": record.evaluation_id,
        "status": record.status.value,
        "domain": record.request.domain,
        "agent_endpoint": record.request.agent_endpoint,
        "created_at": record.created_at,
        "progress": view.progress.to_json() if view.progress else None,
        "queue_position": view.queue_position,
        "avg_reward": (result.get("metrics") or {}).get("avg_reward"),
    }


def describe(tool: str, result: JsonObject) -> str:
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
