"""Chosen mistakes for the stand-in LLM's agent: the oracle's plan for a task, gone wrong in one way.

The stand-in's agent plays the oracle's plan (oracle_script.oracle_steps: the
golden tool calls, hand-overs of the user's actions, then a closing text with
the task's communicate_info). A fault changes that plan; which fault a task
gets is a pure function of the task (`FaultPlan`), so tau2's native llm_agent
and the same agent served over A2A get the same answers from the stand-in, and
their scores can be compared turn for turn.

    none                 the plan as it is
    wrong_argument       the last write is called with one argument changed
    skipped_write        the last write is left out
    early_goodbye        the closing text comes before the first write (the scripted user then stops)
    transfer             transfer_to_human_agents at once, saying so in the same reply, then the transfer message
    max_steps            one read, twice in each reply, again and again, until tau2's --max-steps ends the simulation
    missing_info         every step, but the closing text leaves out the last communicate_info
    wrong_final_message  every step, but each digit of the closing text's communicate_info is off by one
    number_format        every step, but each call's integral numbers in the other JSON form: 2 for 2.0, 2.0 for 2
                         (tau2 hashes the database with the type a tool stored: 2 and 2.0 differ)

A write is a call of a tool tau2 types WRITE (for `call_discoverable_agent_tool`,
the tool it calls), or a hand-over of user actions one of which writes (telecom's
phone, banking's user tools).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cache, lru_cache
from typing import Any

from tau2_a2a.tau2bench.participants.oracle_script import OracleStep, find_task, oracle_steps, user_runs
from tau2_a2a.tau2bench.seam.distribution import registry

KNOWLEDGE_DOMAIN = "banking_knowledge"
TRANSFER_TOOL = "transfer_to_human_agents"
TRANSFER_SUMMARY = "The customer asked to speak with a human agent."
TRANSFER_NOTICE = "I am transferring you to a human agent now."
TRANSFER_MESSAGE = "YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON."
DISCOVERABLE_CALL = "call_discoverable_agent_tool"


class Fault(str, Enum):
    NONE = "none"
    WRONG_ARGUMENT = "wrong_argument"
    SKIPPED_WRITE = "skipped_write"
    EARLY_GOODBYE = "early_goodbye"
    TRANSFER = "transfer"
    MAX_STEPS = "max_steps"
    MISSING_INFO = "missing_info"
    WRONG_FINAL_MESSAGE = "wrong_final_message"
    NUMBER_FORMAT = "number_format"


FaultPlan = Callable[[str, str], Fault]  # (domain, task id) -> the fault the agent makes in that task


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """One reply of the agent: words for the user, tool calls (several at once), or both."""

    text: str | None = None
    calls: tuple[Call, ...] = ()

    @classmethod
    def of(cls, step: OracleStep) -> Reply:
        return cls(calls=(Call(step.tool_name, dict(step.arguments or {})),)) if step.tool_name else cls(step.text)

    def call(self) -> Call | None:
        """Its one tool call, if it makes exactly one."""
        return self.calls[0] if len(self.calls) == 1 else None


def no_faults(domain: str, task_id: str) -> Fault:
    """The stand-in's default: the oracle's plan, unchanged."""
    return Fault.NONE


def explicit_plan(faults: Mapping[tuple[str, str], Fault | str], default: Fault = Fault.NONE) -> FaultPlan:
    """The fault named for each (domain, task id); `default` for the others."""
    chosen = {key: Fault(fault) for key, fault in faults.items()}
    return lambda domain, task_id: chosen.get((domain, task_id), default)


@cache
def hashed_plan(domain: str, task_id: str) -> Fault:
    """One of the faults that change something in the task (or none), chosen by a stable hash of its domain and
    id: the same on every machine and in every process."""
    kinds = [Fault.NONE, *applicable_faults(domain, task_id)]
    digest = hashlib.sha256(f"{domain}/{task_id}".encode()).digest()
    return kinds[int.from_bytes(digest[:8], "big") % len(kinds)]


def applicable_faults(domain: str, task_id: str) -> list[Fault]:
    """The faults whose plan differs from the oracle's in this task, in Fault's order (2 and 2.0 differ)."""
    oracle = repr(agent_plan(domain, task_id, Fault.NONE))
    return [fault for fault in Fault if fault is not Fault.NONE and repr(agent_plan(domain, task_id, fault)) != oracle]


@lru_cache(maxsize=4096)
def agent_plan(domain: str, task_id: str, fault: Fault) -> tuple[Reply, ...]:
    """The agent's replies in order; the stand-in repeats the last one when asked for more."""
    return tuple(_plan(domain, task_id, fault))


def _plan(domain: str, task_id: str, fault: Fault) -> list[Reply]:
    replies = [Reply.of(step) for step in oracle_steps(domain, task_id)]
    if fault is Fault.NONE:
        return replies
    *acting, closing = replies
    writes = write_indices(domain, task_id, acting)
    info = communicate_info(domain, task_id)
    if fault is Fault.WRONG_ARGUMENT:
        calls = [i for i in writes if (call := acting[i].call()) and call.arguments]
        if not calls:
            return replies
        wrong = acting[calls[-1]].call()
        assert wrong is not None
        return [*acting[:calls[-1]], Reply(calls=(Call(wrong.name, changed(wrong.arguments)),)),
                *acting[calls[-1] + 1:], closing]
    if fault is Fault.SKIPPED_WRITE:
        return replies if not writes else [*acting[:writes[-1]], *acting[writes[-1] + 1:], closing]
    if fault is Fault.EARLY_GOODBYE:
        return replies if not writes else [*acting[:writes[0]], closing]
    if fault is Fault.TRANSFER:
        return [Reply(TRANSFER_NOTICE, (Call(TRANSFER_TOOL, {"summary": TRANSFER_SUMMARY}),)), Reply(TRANSFER_MESSAGE)]
    if fault is Fault.MAX_STEPS:
        read = loop_call(domain, task_id, acting)
        return [Reply(calls=(read, read))]
    if fault is Fault.MISSING_INFO:
        return replies if not info else [*acting, Reply(closing_text(info[:-1]))]
    if fault is Fault.WRONG_FINAL_MESSAGE:
        wrong = [shift_digits(item) for item in info]
        return replies if wrong == info else [*acting, Reply(closing_text(wrong))]
    if fault is Fault.NUMBER_FORMAT:
        return [Reply(reply.text, tuple(Call(c.name, other_number_form(c.arguments)) for c in reply.calls))
                for reply in replies]
    raise ValueError(f"unknown fault {fault!r}")


def closing_text(info: list[str]) -> str:
    """The oracle's closing words (oracle_script.oracle_steps) with `info` in place of the task's."""
    return ("Done. " + " ".join(info)).strip()


def communicate_info(domain: str, task_id: str) -> list[str]:
    criteria = find_task(domain, task_id).evaluation_criteria
    return [str(item) for item in (criteria.communicate_info or [])] if criteria else []


def shift_digits(text: str) -> str:
    """Each digit one up (9 to 0): "$164.28" becomes "$275.39"."""
    return re.sub(r"\d", lambda d: str((int(d[0]) + 1) % 10), text)


def changed(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments with one value wrong: the first number (one more), else the last argument."""
    numbers = [key for key, value in arguments.items()
               if isinstance(value, (int, float)) and not isinstance(value, bool)]
    key = numbers[0] if numbers else list(arguments)[-1]
    return {**arguments, key: wrong_value(arguments[key])}


def wrong_value(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "0"
    if isinstance(value, list):
        return value[:-1] if value else ["wrong"]
    if isinstance(value, dict):
        return changed(value) if value else {"wrong": True}
    return "wrong"


def other_number_form(value: Any) -> Any:
    """Integral numbers in the other JSON form (2 and 2.0 swap), everywhere in `value`."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: other_number_form(item) for key, item in value.items()}
    if isinstance(value, list):
        return [other_number_form(item) for item in value]
    return value


def loop_call(domain: str, task_id: str, acting: list[Reply]) -> Call:
    """The read the looping agent repeats: its first golden read; else a read of the domain that needs no
    arguments; else one whose arguments the task's initialization names (telecom: the customer by phone)."""
    reads = [call for reply in acting if (call := reply.call()) and kind(domain, call) == "read"]
    if reads:
        return reads[0]
    schemas = agent_tool_schemas(domain)
    for name, required in schemas.items():
        if not required and tool_types(domain)[0].get(name) == "read":
            return Call(name)
    known = initialization_arguments(domain, task_id)
    for name, required in schemas.items():
        if tool_types(domain)[0].get(name) == "read" and all(arg in known for arg in required):
            return Call(name, {arg: known[arg] for arg in required})
    raise ValueError(f"no read to loop on in {domain} task {task_id}")


def initialization_arguments(domain: str, task_id: str) -> dict[str, Any]:
    """Every argument of the task's initialization actions, by name (telecom: the user's phone number)."""
    initial = find_task(domain, task_id).initial_state
    actions = (initial.initialization_actions or []) if initial else []
    return {name: value for action in actions for name, value in (action.arguments or {}).items()}


def write_indices(domain: str, task_id: str, acting: list[Reply]) -> list[int]:
    """Where the oracle's plan writes: calls of write tools, and hand-overs (the user's runs of actions, in
    order) that hold a write of the user's."""
    user_types = tool_types(domain)[1]
    runs = iter(user_runs(find_task(domain, task_id)))
    writes = []
    for index, reply in enumerate(acting):
        call = reply.call()
        if call is not None:
            writes += [index] if kind(domain, call) == "write" else []
        elif any(user_types.get(action.name) == "write" for action in next(runs)):
            writes.append(index)
    return writes


def kind(domain: str, call: Call) -> str:
    """tau2's type of the tool a call calls: read, write or generic."""
    name = call.name
    if name == DISCOVERABLE_CALL:
        name = str(call.arguments.get("agent_tool_name", name))
    return tool_types(domain)[0].get(name, "generic")


@cache
def tool_types(domain: str) -> tuple[dict[str, str], dict[str, str]]:
    """tau2's type (read, write, generic) of each agent tool and each user tool, discoverable ones included."""
    environment = domain_environment(domain)
    agent = {name: environment.tools.tool_type(name).value for name in environment.tools.tools}
    user = ({name: environment.user_tools.tool_type(name).value for name in environment.user_tools.tools}
            if environment.user_tools is not None else {})
    return agent, user


@cache
def agent_tool_schemas(domain: str) -> dict[str, tuple[str, ...]]:
    """The agent's tools in tau2's order, each with its required parameters."""
    return {tool.name: tuple(tool.openai_schema["function"].get("parameters", {}).get("required", []))
            for tool in domain_environment(domain).get_tools()}


@cache
def domain_environment(domain: str) -> Any:
    """The domain's environment, offline (banking_knowledge without its knowledge base: the tools are the same)."""
    arguments = {"retrieval_variant": "no_knowledge"} if domain == KNOWLEDGE_DOMAIN else {}
    return registry.get_env_constructor(domain)(**arguments)
