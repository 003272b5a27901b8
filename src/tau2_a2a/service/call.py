"""A message to the service, read once: a tool call, an AgentBeats assessment, text, or a refusal.

The request handler reads each message here before anything stores it
(handler.py): a message over --max-message-bytes is cut (request_limit.py),
every part's secrets are moved out (vault.py, which parses each data part
once), and what the message asks for becomes one typed `ServiceCall`. The
executor (executor.py) acts on it; nothing after this module reads the
message's JSON again. Refusals of size, form and schema are made here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tau2_a2a.service.assessment import Assessment, AssessmentRejected, is_assessment, parse
from tau2_a2a.service.request_limit import cut_message, cut_message_refusal
from tau2_a2a.service.tool_specs import ALIASES
from tau2_a2a.service.vault import TokenVault, scrub_a2a_part, vault

if TYPE_CHECKING:
    from a2a.types import Message

TOOL_CALL_KEYS = frozenset({"tool", "arguments"})


@dataclass(frozen=True)
class ToolCall:
    """`{"tool": name, "arguments": {...}}`: `tool` is the canonical name of a known tool (else as sent); the
    target's token, if any, is a vault reference in `arguments`."""

    tool: object
    arguments: object
    only_call: bool = True  # the data part holds nothing but tool and arguments


@dataclass(frozen=True)
class AssessmentCall:
    """An AgentBeats assessment request, checked."""

    assessment: Assessment


@dataclass(frozen=True)
class TextCall:
    """Words: for the service's model, or for the help answer."""

    text: str


@dataclass(frozen=True)
class Refusal:
    """A message the service will not act on: `rejected` (declined, nothing ran) or failed, with why."""

    reason: str
    rejected: bool = True


Request = ToolCall | AssessmentCall | TextCall | Refusal


@dataclass(frozen=True)
class ServiceCall:
    """What a message asks for, and, for a task continued after a restart, the evaluation it follows."""

    request: Request
    resume: str | None = None  # set only by the service itself (handler.continue_task), never by a client
    data_parts: int = 0

    def resumed(self, evaluation_id: str) -> ServiceCall:
        return replace(self, resume=evaluation_id)


def read_call(message: Message, max_bytes: int, store: TokenVault = vault) -> ServiceCall:
    """In place: `message` cut when over `max_bytes`, its secrets moved out; what it asks for.
    ValueError for a data part with no JSON form."""
    cut = cut_message(message, max_bytes)
    if cut is not None:
        return ServiceCall(Refusal(cut_message_refusal(cut)))
    found: object | None = None
    texts: list[str] = []
    data_parts = 0
    for part in message.parts:
        value = scrub_a2a_part(part, store)
        if part.HasField("text"):
            texts.append(part.text)
            if found is None and value is not None:
                found = value  # an assessment sent as JSON text
        elif part.HasField("data"):
            data_parts += 1
            if not isinstance(value, dict) or ("tool" not in value and not is_assessment(value)):
                keys = ", ".join(sorted(value)) if isinstance(value, dict) else type(value).__name__
                return ServiceCall(Refusal(f'A data part must be {{"tool": "<name>", "arguments": {{...}}}}; '
                                           f"got {keys}.", rejected=False), data_parts=data_parts)
            found = value
    return ServiceCall(_request(found, "\n".join(texts).strip()), data_parts=data_parts)


def _request(found: object | None, text: str) -> Request:
    if found is None:
        return TextCall(text)
    if is_assessment(found):
        try:
            return AssessmentCall(parse(found))
        except AssessmentRejected as error:
            return Refusal(str(error))
    assert isinstance(found, dict)  # read_call keeps only objects with "tool" or an assessment
    name = found.get("tool")
    tool = ALIASES.get(name, name) if isinstance(name, str) else name
    return ToolCall(tool, found.get("arguments"), only_call=set(found) <= TOOL_CALL_KEYS)
