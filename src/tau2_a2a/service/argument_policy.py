"""The policy on a caller's arguments: what it may choose about the user LLM, and what a request may leave in
the service's stores.

The evaluation's process runs the user simulator with the service's own
provider keys (its environment: OPENAI_API_KEY and the like). Anything that
decides where an LLM request goes or what it carries (an endpoint such as
`api_base` or `base_url`, headers, a key, a provider setting) would let a
caller send those keys to a server of theirs. So callers choose only:

- a user LLM from the operator's allow-list (`--allowed-user-llms`), whose
  endpoint is the operator's (`--user-llm-api-base`, or the provider's own);
- sampling parameters, from SAMPLING_ARGS.

Everything else in `user_llm_args` is refused by name, never echoing its value.

Before any store sees a structured request (the A2A task store, ADK's session),
`scrub_tool_call` and `scrub_assessment` replace what the service would refuse
and must not keep: the value of every secret-looking or unknown argument, of
every unknown `user_llm_args` key, the user name and password of an
endpoint URL, and all but the scheme, host and port of one with a query string
or fragment. The refusal then still names the argument; the value is gone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TypeGuard

from tau2_a2a.client.config import has_query_or_fragment, origin, without_userinfo
from tau2_a2a.service.wire import JsonObject
from tau2_a2a.tau2bench.seam.defaults import DEFAULT_LLM_USER

REMOVED = "<removed>"  # what a scrubbed value becomes in every stored copy of the request
NO_LLM_USERS = frozenset({"scripted_user"})  # users that call no LLM: user_llm is not used
DEFAULT_ALLOWED_USER_LLMS: tuple[str, ...] = (DEFAULT_LLM_USER,)  # tau2's default user LLM only
_SECRET_KEY = re.compile(r"(^|_)(api_?key|key|secret|password|authorization|credentials?|token)$", re.IGNORECASE)
_REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high")
_MAX_TOKENS = 1_000_000


class ArgumentRefused(ValueError):
    """An argument the service refuses; the message names it, never its value."""


def _number(low: float, high: float) -> Callable[[object], TypeGuard[float]]:
    def check(value: object) -> TypeGuard[float]:
        return (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
                and low <= value <= high)
    return check


def _whole(low: int, high: int) -> Callable[[object], bool]:
    def check(value: object) -> bool:
        return _number(low, high)(value) and float(value).is_integer()
    return check


def _stop(value: object) -> bool:
    def one(text: object) -> bool:
        return isinstance(text, str) and 0 < len(text) <= 100

    return one(value) or (isinstance(value, list) and 0 < len(value) <= 4 and all(map(one, value)))


# name -> (what it accepts, its check). Sampling only: nothing here picks an endpoint, header or credential.
SAMPLING_ARGS: dict[str, tuple[str, Callable[[object], bool]]] = {
    "temperature": ("a number from 0 to 2", _number(0, 2)),
    "top_p": ("a number from 0 to 1", _number(0, 1)),
    "max_tokens": (f"a whole number from 1 to {_MAX_TOKENS}", _whole(1, _MAX_TOKENS)),
    "max_completion_tokens": (f"a whole number from 1 to {_MAX_TOKENS}", _whole(1, _MAX_TOKENS)),
    "seed": ("a whole number from 0 to 2**31-1", _whole(0, 2**31 - 1)),
    "frequency_penalty": ("a number from -2 to 2", _number(-2, 2)),
    "presence_penalty": ("a number from -2 to 2", _number(-2, 2)),
    "reasoning_effort": (f"one of {', '.join(_REASONING_EFFORTS)}", lambda v: v in _REASONING_EFFORTS),
    "stop": ("a string, or a list of up to 4 strings, each of 1 to 100 characters", _stop),
}


def secret_looking(name: object) -> bool:
    """Whether an argument's name says it holds a credential (api_key, password, token, ...)."""
    return isinstance(name, str) and bool(_SECRET_KEY.search(name))


def check_sampling_args(args: object) -> JsonObject:
    """`user_llm_args` as the evaluation uses it, or ArgumentRefused naming the first bad key."""
    if not isinstance(args, dict):
        raise ArgumentRefused("user_llm_args must be a JSON object of sampling parameters "
                              f"({', '.join(SAMPLING_ARGS)}).")
    refused = [str(key) for key in args if key not in SAMPLING_ARGS]
    if refused:
        raise ArgumentRefused(
            f"user_llm_args accepts only sampling parameters; refused: {', '.join(sorted(refused))}. "
            f"Accepted: {', '.join(SAMPLING_ARGS)} (the user LLM's endpoint and keys are the service's).")
    checked = {}
    for key, value in args.items():
        accepts, check = SAMPLING_ARGS[key]
        if not check(value):
            raise ArgumentRefused(f"user_llm_args.{key} must be {accepts}.")
        checked[key] = int(value) if accepts.startswith("a whole") else value
    return checked


def stored_endpoint(url: str) -> str:
    """What may be kept of an endpoint URL: without its user name and password, and of one with a query string
    or fragment (a token may sit there) its scheme, host and port only, then `/?<removed>`: still refused."""
    if has_query_or_fragment(url):
        return f"{origin(url)}/?{REMOVED}"
    return without_userinfo(url)


@dataclass(frozen=True)
class UserLLMPolicy:
    """The user LLMs the operator allows, and the endpoint they are reached at (None: the provider's)."""

    allowed: tuple[str, ...] = DEFAULT_ALLOWED_USER_LLMS
    api_base: str | None = None

    def __post_init__(self) -> None:
        if not self.allowed or any(not name.strip() for name in self.allowed):
            raise ValueError("--allowed-user-llms (TAU2_EVAL_ALLOWED_USER_LLMS) must name at least one "
                             "LiteLLM model, comma-separated.")

    @property
    def default(self) -> str:
        """The user LLM when a request names none: tau2's default if allowed, else the first allowed."""
        return DEFAULT_LLM_USER if DEFAULT_LLM_USER in self.allowed else self.allowed[0]

    def check(self, user: str, user_llm: str) -> str:
        """`user_llm` if this service runs it for `user`, else ArgumentRefused naming the allowed ones."""
        if user in NO_LLM_USERS or user_llm in self.allowed:
            return user_llm
        raise ArgumentRefused(
            f"user_llm {user_llm!r} is not allowed on this service. Allowed user LLMs: {', '.join(self.allowed)} "
            f"(or user scripted_user, which needs no LLM).")


def scrub_arguments(arguments: JsonObject, accepted: Collection[str]) -> bool:
    """In place: the values the service would refuse and must not store are replaced. Whether any was."""
    changed = False
    for key, value in list(arguments.items()):
        if key not in accepted or secret_looking(key):
            if value != REMOVED:
                arguments[key] = REMOVED
                changed = True
        elif key == "agent_endpoint" and isinstance(value, str) and stored_endpoint(value) != value:
            arguments[key] = stored_endpoint(value)
            changed = True
        elif key == "user_llm_args" and isinstance(value, dict):
            changed = _scrub_llm_args(value) or changed
    return changed


def _scrub_llm_args(args: JsonObject) -> bool:
    changed = False
    for key in list(args):
        if key not in SAMPLING_ARGS and args[key] != REMOVED:
            args[key] = REMOVED
            changed = True
    return changed


def scrub_assessment(request: JsonObject, config_keys: Collection[str]) -> bool:
    """In place, for an AgentBeats assessment request: participants' URLs and the config."""
    changed = False
    participants = request.get("participants")
    if isinstance(participants, dict):
        for role, url in participants.items():
            if isinstance(url, str) and stored_endpoint(url) != url:
                participants[role] = stored_endpoint(url)
                changed = True
    config = request.get("config")
    if isinstance(config, dict):
        changed = scrub_arguments(config, config_keys) or changed
    return changed


DEFAULT_USER_LLMS = UserLLMPolicy()
