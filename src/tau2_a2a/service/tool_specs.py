"""The service's five tools as the card shows them: names, aliases, argument schemas, examples.

Also what the token vault needs to scrub a request: the arguments each tool
accepts, and the names of the token argument and of its reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from tau2_a2a.service.argument_policy import DEFAULT_USER_LLMS, UserLLMPolicy
from tau2_a2a.service.jobs.limits import DEFAULT_LIMITS, Limits
from tau2_a2a.service.request import TOKEN_ARGUMENT, RequestPolicy, request_schema
from tau2_a2a.service.wire import JsonObject

LIST_DOMAINS = "list_domains"
RUN = "run_tau2_evaluation"
GET = "get_evaluation"
LIST = "list_evaluations"
CANCEL = "cancel_evaluation"
TOOL_NAMES = (LIST_DOMAINS, RUN, GET, LIST, CANCEL)
ALIASES = {"ListDomains": LIST_DOMAINS, "RunTau2Evaluation": RUN}
REFERENCE_ARGUMENT = "agent_auth_token_ref"  # what the token vault leaves of TOKEN_ARGUMENT in a stored request


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: JsonObject  # JSON Schema of the arguments
    example: JsonObject  # example arguments

    @property
    def required(self) -> list[str]:
        return list(self.parameters.get("required", []))

    @property
    def accepted(self) -> list[str]:
        return list(self.parameters.get("properties", {}))

    def example_request(self) -> JsonObject:
        return {"tool": self.name, "arguments": self.example}

    def model_parameters(self) -> JsonObject:
        """The parameters the service's model is offered: all but the target's token, since a token typed
        into a chat would be stored with the conversation."""
        properties = {name: schema for name, schema in self.parameters.get("properties", {}).items()
                      if name != TOKEN_ARGUMENT}
        return {**self.parameters, "properties": properties}


_EVALUATION_ID = {"type": "string", "pattern": "^ev-[0-9a-f]{12}$",
                  "description": "The id run_tau2_evaluation returned."}


def tool_specs(limits: Limits = DEFAULT_LIMITS, user_llms: UserLLMPolicy = DEFAULT_USER_LLMS
               ) -> dict[str, ToolSpec]:
    """Each tool's description, argument schema and example, as the card shows them."""
    run_schema = request_schema(RequestPolicy(limits, user_llms))
    specs = [
        ToolSpec(LIST_DOMAINS, "The tau2 domains, each with its task count, task splits and tool names.",
                 {"type": "object", "properties": {}, "additionalProperties": False}, {}),
        ToolSpec(RUN, "Evaluate an A2A agent on a tau2 domain. Answers with an A2A task: working, with "
                      "progress updates, then an artifact with the metrics (avg_reward, pass^k), per-task "
                      "rewards and A2A protocol metrics.",
                 run_schema,
                 {"domain": "airline", "agent_endpoint": "http://127.0.0.1:9100", "user": "scripted_user",
                  "num_tasks": 5}),
        ToolSpec(GET, "An evaluation's status, progress (or queue position) and results with 95% intervals, "
                      "by id, and the URL of its HTML report.",
                 {"type": "object", "properties": {"evaluation_id": _EVALUATION_ID},
                  "required": ["evaluation_id"], "additionalProperties": False},
                 {"evaluation_id": "ev-0123456789ab"}),
        ToolSpec(LIST, "Every evaluation this service knows, newest last, with status and average reward.",
                 {"type": "object", "properties": {}, "additionalProperties": False}, {}),
        ToolSpec(CANCEL, "Stop an evaluation. Simulations that finished are kept in its results.",
                 {"type": "object", "properties": {"evaluation_id": _EVALUATION_ID},
                  "required": ["evaluation_id"], "additionalProperties": False},
                 {"evaluation_id": "ev-0123456789ab"}),
    ]
    return {spec.name: spec for spec in specs}


def accepted_arguments(tool: object) -> frozenset[str]:
    """The argument names `tool` (or its alias) accepts; none for an unknown tool, or for a name that is not a
    string (a caller may send any JSON there). For scrubbing requests."""
    return _accepted_by(tool) if isinstance(tool, str) else frozenset()


@cache
def _accepted_by(tool: str) -> frozenset[str]:
    spec = tool_specs().get(ALIASES.get(tool, tool))
    if spec is None:
        return frozenset()
    return frozenset(spec.accepted) | ({REFERENCE_ARGUMENT} if spec.name == RUN else set())
