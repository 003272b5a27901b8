"""AgentBeats assessment requests: `{"participants": {...}, "config": {...}}`, checked, and sharding.

AgentBeats' gateway sends an evaluator ("green") agent one JSON object, as the
text of a text part (or, from other callers, as a data part): the participant
to assess under a role name, and a config. The platform's runner adds
`shard_index` and `num_shards` (and sometimes `num_instances`) to the config
to spread one assessment over parallel requests.

Every check here refuses with one line that names the key and the accepted
values; the tool-level checks (domain, target policy, limits) then run as for
any `run_tau2_evaluation` request. Defaults are tau2's own.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from tau2_a2a.service.wire import JsonObject
from tau2_a2a.tau2bench.seam.distribution import (
    DEFAULT_LLM_TEMPERATURE_USER,
    DEFAULT_LLM_USER,
    DEFAULT_MAX_STEPS,
    DEFAULT_NUM_TRIALS,
    DEFAULT_USER_IMPLEMENTATION,
)

PARTICIPANTS = "participants"
CONFIG = "config"
IGNORED_KEYS = ("num_instances",)
_WHOLE = "a whole number"
CONFIG_KEYS: dict[str, str] = {  # key -> the values it accepts, as the refusal names them
    "domain": "a tau2 domain name (required)",
    "task_ids": "a non-empty list of task ids",
    "num_tasks": f"{_WHOLE} >= 1",
    "task_split": "a task split name of the domain",
    "num_trials": f"{_WHOLE} >= 1 (default {DEFAULT_NUM_TRIALS})",
    "max_steps": f"{_WHOLE} >= 1 (default {DEFAULT_MAX_STEPS})",
    "max_concurrency": f"{_WHOLE} >= 1",
    "user_llm": "a LiteLLM model name the service allows (default: the service's, usually "
                f"{DEFAULT_LLM_USER})",
    "user_llm_args": "a JSON object of the user LLM's sampling parameters (temperature, top_p, ...)",
    "user": f"a tau2 user: {DEFAULT_USER_IMPLEMENTATION} or scripted_user",
    "retrieval_config": "a retrieval config name of banking_knowledge, e.g. bm25_grep (default: tau2's)",
    "agent_tools": "how the agent gets its tools: message, mcp or auto (default message)",
    "agent_driven": "true or false: the agent drives the conversation over MCP (default false)",
    "agent_price_model": "a LiteLLM model name that prices tokens the agent reports without a cost",
    "shard_index": f"{_WHOLE} >= 0, below num_shards",
    "num_shards": f"{_WHOLE} >= 1",
    "num_instances": f"{_WHOLE} >= 1 (accepted and ignored)",
}
_WHOLE_KEYS = {"num_tasks": 1, "num_trials": 1, "max_steps": 1, "max_concurrency": 1, "shard_index": 0,
               "num_shards": 1, "num_instances": 1}
_WHOLE_MAX = 1_000_000  # beyond any sensible request; the tool's checks set the service's own limits
_TEXT_KEYS = ("domain", "task_split", "user_llm", "user", "retrieval_config", "agent_tools", "agent_price_model")


class AssessmentRejected(ValueError):
    """An assessment request the service will not run; the one-line message says why."""


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count`: every `count`-th task of the selection, from the `index`-th."""

    index: int = 0
    count: int = 1

    def take(self, task_ids: list[str]) -> list[str]:
        """This shard's tasks, in selection order; the shards of a selection are disjoint and cover it."""
        return task_ids[self.index::self.count]


@dataclass(frozen=True)
class Assessment:
    """A checked assessment request: who to assess, and the evaluation's arguments."""

    role: str
    endpoint: str
    arguments: JsonObject  # run_tau2_evaluation arguments, tau2's defaults filled in
    shard: Shard = field(default_factory=Shard)
    ignored: tuple[str, ...] = ()


def is_assessment(value: object) -> bool:
    """An object with `participants` is an assessment request (a tool request has `tool`)."""
    return isinstance(value, dict) and PARTICIPANTS in value and "tool" not in value


def from_text(text: str) -> JsonObject | None:
    """The assessment request a text part holds as JSON, or None if the text is not one."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = json.loads(stripped)
    except ValueError:
        return None
    return value if is_assessment(value) else None


def parse(request: object) -> Assessment:
    """The Assessment in `request`, or AssessmentRejected naming the first bad key."""
    if not isinstance(request, dict):
        raise AssessmentRejected(f"An assessment request is a JSON object with {PARTICIPANTS} and {CONFIG}.")
    unknown = sorted(set(request) - {PARTICIPANTS, CONFIG})
    if unknown:
        raise AssessmentRejected(f"Unknown key(s) {', '.join(map(repr, unknown))} in the assessment request. "
                                 f"Accepted keys: {PARTICIPANTS}, {CONFIG}.")
    role, endpoint = _participant(request.get(PARTICIPANTS))
    config = request.get(CONFIG)
    if not isinstance(config, dict):
        raise AssessmentRejected(f"{CONFIG} must be a JSON object with at least \"domain\"; "
                                 f"got {type(config).__name__}.")
    unknown = sorted(set(config) - set(CONFIG_KEYS))
    if unknown:
        raise AssessmentRejected(f"Unknown config key {unknown[0]!r}. Accepted keys: {', '.join(CONFIG_KEYS)}.")
    if "domain" not in config:
        raise AssessmentRejected(f"config.domain is required: {CONFIG_KEYS['domain']}.")
    values: JsonObject = {key: _checked(key, value) for key, value in config.items()}
    shard = _shard(values.get("shard_index"), values.get("num_shards"))
    arguments: JsonObject = {
        "domain": values["domain"],
        "agent_endpoint": endpoint,
        "user": values.get("user", DEFAULT_USER_IMPLEMENTATION),
        "user_llm": values.get("user_llm"),  # None: the service's default user LLM
        "user_llm_args": values.get("user_llm_args", {"temperature": DEFAULT_LLM_TEMPERATURE_USER}),
        "num_trials": values.get("num_trials", DEFAULT_NUM_TRIALS),
        "max_steps": values.get("max_steps", DEFAULT_MAX_STEPS),
        **{key: values[key] for key in ("task_ids", "num_tasks", "task_split", "max_concurrency",
                                              "retrieval_config", "agent_tools", "agent_driven", "agent_price_model")
                                        if key in values},
    }
    return Assessment(role=role, endpoint=endpoint, arguments=arguments, shard=shard,
                      ignored=tuple(key for key in IGNORED_KEYS if key in config))


def _participant(participants: object) -> tuple[str, str]:
    if not isinstance(participants, dict):
        raise AssessmentRejected(f"{PARTICIPANTS} must be a JSON object of one role and its agent's URL, "
                                 f'e.g. {{"agent": "http://host:port"}}; got {type(participants).__name__}.')
    if len(participants) != 1:
        roles = ", ".join(map(repr, participants)) or "none"
        raise AssessmentRejected(f"{PARTICIPANTS} must name exactly one agent (tau2 assesses one agent; "
                                 f"AgentBeats' tau2 scenarios use the role 'agent'); got {len(participants)}: "
                                 f"{roles}.")
    [(role, endpoint)] = participants.items()
    if not isinstance(endpoint, str) or not endpoint.strip():
        raise AssessmentRejected(f"{PARTICIPANTS}.{role} must be the agent's base URL (http or https); "
                                 f"got {endpoint!r}.")
    return role, endpoint.strip()


def _checked(key: str, value: object) -> int | str | bool | list[str] | JsonObject:
    """The config value with its JSON type checked (whole doubles count as whole numbers)."""
    wrong = AssessmentRejected(f"config.{key} must be {CONFIG_KEYS[key]}; got {json.dumps(value)}.")
    if key in _WHOLE_KEYS:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or float(value) != int(value) or int(value) < _WHOLE_KEYS[key]:
            raise wrong
        if int(value) > _WHOLE_MAX:
            raise AssessmentRejected(f"config.{key} must be at most {_WHOLE_MAX}; got {json.dumps(value)}.")
        return int(value)
    if key in _TEXT_KEYS:
        if not isinstance(value, str) or not value.strip():
            raise wrong
        return value.strip()
    if key == "user_llm_args":
        if not isinstance(value, dict):
            raise wrong
        return value
    if key == "agent_driven":
        if not isinstance(value, bool):
            raise wrong
        return value
    if key == "task_ids":
        if not isinstance(value, list) or not value or not all(_is_task_id(t) for t in value):
            raise wrong
        return [str(int(t)) if isinstance(t, float) else str(t) for t in value]
    raise AssertionError(f"no check for config key {key}")


def _is_task_id(value: object) -> bool:
    if isinstance(value, str):
        return bool(value)
    if isinstance(value, float):
        return value.is_integer()
    return isinstance(value, int) and not isinstance(value, bool)


def _shard(index: int | None, count: int | None) -> Shard:
    if index is None and count is None:
        return Shard()
    if index is None or count is None:
        raise AssessmentRejected("config.shard_index and config.num_shards go together: give both or neither.")
    if index >= count:
        raise AssessmentRejected(f"config.shard_index must be {CONFIG_KEYS['shard_index']}; got {index} "
                                 f"with num_shards {count}.")
    return Shard(index, count)
