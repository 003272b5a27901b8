"""AgentBeats assessment requests: `{"participants": {...}, "config": {...}}`, checked, and sharding.

AgentBeats' gateway sends an evaluator ("green") agent one JSON object, as the
text of a text part (or, from other callers, as a data part): the participant
to assess under a role name, and a config. The platform's runner adds
`shard_index` and `num_shards` (and sometimes `num_instances`) to the config
to spread one assessment over parallel requests.

The config's keys are run_tau2_evaluation's arguments, as EvaluationRequest
declares them (all but the agent's endpoint: that is the participant), and
the sharding keys. Each value's JSON shape is checked here by its argument's
kind, refused in one line that names the key and the accepted values; the
tool-level checks (domain, target policy, limits) and defaults (tau2's own)
then come from check_request, as for any `run_tau2_evaluation` request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tau2_a2a.service.arguments import SHAPE_MAX, Kind, Misshapen, Whole, declared
from tau2_a2a.service.request import arguments as request_arguments
from tau2_a2a.service.shard import Shard
from tau2_a2a.service.wire import JsonObject

__all__ = ["CONFIG_KEYS", "Assessment", "AssessmentRejected", "Shard", "from_text", "is_assessment", "parse"]

PARTICIPANTS = "participants"
CONFIG = "config"
IGNORED_KEYS = ("num_instances",)
# The config's keys that pick the tasks and size the run, listed first in refusals (as they always were); the
# other arguments follow in the card's order, then the platform's sharding keys.
_LISTED_FIRST = ("domain", "task_ids", "num_tasks", "task_split", "num_trials", "max_steps", "max_concurrency")
_SHARDING: dict[str, tuple[Kind, str]] = {
    "shard_index": (Whole(0, SHAPE_MAX), "a whole number >= 0, below num_shards"),
    "num_shards": (Whole(1, SHAPE_MAX), "a whole number >= 1"),
    "num_instances": (Whole(1, SHAPE_MAX), "a whole number >= 1 (accepted and ignored)"),
}


def _config_keys() -> dict[str, tuple[Kind, str]]:
    """Each config key's kind and what its refusal says it accepts: every argument of run_tau2_evaluation that
    a config may give (all but the agent's endpoint, which is the participant's), then the sharding keys."""
    given = {item.name: (spec.kind, spec.accepts) for item in request_arguments()
             if (spec := declared(item)).accepts}
    ordered = sorted(given, key=lambda name: _LISTED_FIRST.index(name) if name in _LISTED_FIRST
                     else len(_LISTED_FIRST))
    return {**{name: given[name] for name in ordered}, **_SHARDING}


_KEYS = _config_keys()
CONFIG_KEYS: dict[str, str] = {key: accepts for key, (_, accepts) in _KEYS.items()}  # key -> its refusal's words
_ARGUMENT_KEYS = frozenset(_KEYS) - frozenset(_SHARDING)


class AssessmentRejected(ValueError):
    """An assessment request the service will not run; the one-line message says why."""


@dataclass(frozen=True)
class Assessment:
    """A checked assessment request: who to assess, and the evaluation's arguments."""

    role: str
    endpoint: str
    arguments: JsonObject  # run_tau2_evaluation arguments, as the config gave them (check_request fills defaults)
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
    values: JsonObject = {key: _shaped(key, value) for key, value in config.items()}
    shard = _shard(values.get("shard_index"), values.get("num_shards"))
    arguments: JsonObject = {"agent_endpoint": endpoint,
                             **{key: value for key, value in values.items() if key in _ARGUMENT_KEYS}}
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


def _shaped(key: str, value: object) -> Any:
    """The config value with its JSON shape checked by its argument's kind (whole doubles count as whole)."""
    kind, accepts = _KEYS[key]
    try:
        return kind.shape(value)
    except Misshapen as error:
        raise AssessmentRejected(f"config.{key} must be {str(error) or accepts}; got {json.dumps(value)}.") from None


def _shard(index: int | None, count: int | None) -> Shard:
    if index is None and count is None:
        return Shard()
    if index is None or count is None:
        raise AssessmentRejected("config.shard_index and config.num_shards go together: give both or neither.")
    if index >= count:
        raise AssessmentRejected(f"config.shard_index must be {CONFIG_KEYS['shard_index']}; got {index} "
                                 f"with num_shards {count}.")
    return Shard(index, count)
