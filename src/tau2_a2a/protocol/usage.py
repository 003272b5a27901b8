"""The LLM usage an agent reports with its reply, in every shape agents send it over A2A. Pure: no I/O.

A2A has no standard usage field, so agents put it in metadata. The shapes read:

- `USAGE_EXTENSION_URI`, this project's A2A extension (docs/protocol.md): the
  turn's total, `{"input_tokens", "output_tokens", "cached_input_tokens",
  "reasoning_tokens", "cost_usd", "model", "llm_calls"}`, on the final Message,
  the Task's status message, an artifact, or the Task itself;
- `llm_usage`, what this project's baseline agent sent before the extension:
  the turn's total, `{"prompt_tokens", "completion_tokens", "cost"}`;
- `adk_usage_metadata`, which google-adk's A2A converter puts on the events of
  every ADK agent (genai `UsageMetadata`: `promptTokenCount`,
  `candidatesTokenCount`, `totalTokenCount`, `cachedContentTokenCount`,
  `thoughtsTokenCount`), one LLM call per ADK event, named by `adk_event_id`;
- `kagent_usage_metadata`, kagent's copy of ADK's, partial events flagged
  `kagent_partial`.

A turn is counted once and whole: a turn total that shows up several times
(the last one read wins, as a running total would), and one entry per LLM call
(`adk_event_id`), however many partial or repeated events carry it, summed
over the calls. When several shapes are present the agent's own total wins:
the extension, then `llm_usage`, then ADK's, then kagent's calls.

Where it is read: the metadata of the reply (Message or Task), the Task's
status message and its artifacts, and their parts; and, for a streamed reply,
of every event (status and artifact updates carry ADK's usage on the event
itself, which the assembled reply alone would lose). Not the Task's history:
a continued task keeps earlier turns there.

Partial: a blocking reply of an ADK agent keeps on its Task the usage of the
turn's last LLM call only (a2a-sdk's task store merges each event's metadata
into the Task's, so each call's usage replaces the one before). The Task's
history still holds one message per event of the turn, so the calls it made
are counted there (an agent message that is not only tool results is an LLM
call's output); fewer calls read than made is usage known in part, `partial`:
at least what it says, never a figure that looks whole.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from a2a.types import AgentExtension, Message, Role, StreamResponse, Task

if TYPE_CHECKING:
    from google.protobuf.struct_pb2 import Struct, Value

USAGE_EXTENSION_URI = "https://tau2-a2a.dev/extensions/usage/v1"
LLM_USAGE_KEY = "llm_usage"  # the baseline agent's metadata before the extension
ADK_USAGE_KEY = "adk_usage_metadata"
ADK_EVENT_KEY = "adk_event_id"
ADK_PARTIAL_KEY = "adk_partial"
ADK_TYPE_KEY = "adk_type"  # on a part ADK converted: function_call, function_response, ...
ADK_TOOL_RESULT = "function_response"
KAGENT_USAGE_KEY = "kagent_usage_metadata"
KAGENT_EVENT_KEY = "kagent_event_id"
KAGENT_PARTIAL_KEY = "kagent_partial"
# The usage a streamed reply's events reported, kept in the assembled reply's metadata (see protocol/stream.py).
ASSEMBLED_USAGE_KEY = "tau2_a2a_reported_usage"

EXTENSION = "extension"
LLM_USAGE = "llm_usage"
ADK = "adk"
KAGENT = "kagent"
_PRIORITY = (EXTENSION, LLM_USAGE, ADK, KAGENT)


def usage_extension() -> AgentExtension:
    """The usage extension as an agent's card declares it (`capabilities.extensions`)."""
    return AgentExtension(uri=USAGE_EXTENSION_URI, required=False,
                          description="Reports each reply's LLM usage: input, output, cached and reasoning tokens, "
                                      "cost in USD and the model, in the metadata of the final Message, Task "
                                      "status message or artifact, under this URI.")


class UsagePayload(TypedDict):
    """The usage extension's payload, as this project's agents write it (docs/protocol.md)."""

    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    reasoning_tokens: int
    llm_calls: int
    cost_usd: NotRequired[float]
    model: NotRequired[str]


class AssembledUsage(UsagePayload):
    """The usage an assembled reply keeps, with the shape it came in."""

    source: str
    partial: NotRequired[bool]


@dataclass(frozen=True)
class ReportedUsage:
    """What an agent said one turn cost it: tokens (input includes cached), USD cost and model when it said.

    `source` names the shape it came in (extension, llm_usage, adk, kagent); `partial`, that some of the
    turn's LLM calls reported no usage the client could read: the figures are a lower bound.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None
    model: str | None = None
    llm_calls: int = 1
    source: str = EXTENSION
    partial: bool = False

    def plus(self, other: ReportedUsage) -> ReportedUsage:
        """Two LLM calls of one turn: tokens and costs add (a cost unknown for either is unknown)."""
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return replace(self, input_tokens=self.input_tokens + other.input_tokens,
                       output_tokens=self.output_tokens + other.output_tokens,
                       cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
                       reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
                       cost_usd=cost, model=self.model or other.model, llm_calls=self.llm_calls + other.llm_calls,
                       partial=self.partial or other.partial)

    def as_extension(self) -> UsagePayload:
        """The extension's payload for this usage (what an agent puts under USAGE_EXTENSION_URI)."""
        payload: UsagePayload = {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                                   "cached_input_tokens": self.cached_input_tokens,
                                   "reasoning_tokens": self.reasoning_tokens, "llm_calls": self.llm_calls}
        if self.cost_usd is not None:
            payload["cost_usd"] = self.cost_usd
        if self.model:
            payload["model"] = self.model
        return payload

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _count(value: object) -> int | None:
    """A token count: a finite number at least 0 (A2A data carries numbers as doubles), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return int(round(value))


def _money(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def _text(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def from_extension(payload: object) -> ReportedUsage | None:
    """The extension's payload; None when it holds no token count."""
    if not isinstance(payload, dict):
        return None
    tokens = _count(payload.get("input_tokens")), _count(payload.get("output_tokens"))
    if tokens == (None, None):
        return None
    return ReportedUsage(input_tokens=tokens[0] or 0, output_tokens=tokens[1] or 0,
                         cached_input_tokens=_count(payload.get("cached_input_tokens")) or 0,
                         reasoning_tokens=_count(payload.get("reasoning_tokens")) or 0,
                         cost_usd=_money(payload.get("cost_usd")), model=_text(payload.get("model")),
                         llm_calls=_count(payload.get("llm_calls")) or 1, source=EXTENSION)


def from_llm_usage(payload: object) -> ReportedUsage | None:
    """The baseline agent's former `llm_usage`: prompt and completion tokens, cost."""
    if not isinstance(payload, dict):
        return None
    tokens = _count(payload.get("prompt_tokens")), _count(payload.get("completion_tokens"))
    if tokens == (None, None):
        return None
    return ReportedUsage(input_tokens=tokens[0] or 0, output_tokens=tokens[1] or 0,
                         cost_usd=_money(payload.get("cost")), model=_text(payload.get("model")), source=LLM_USAGE)


def from_genai(payload: object, source: str = ADK) -> ReportedUsage | None:
    """genai's UsageMetadata (ADK, kagent): one LLM call.

    Output is `candidatesTokenCount`, plus `thoughtsTokenCount` when the total
    says thoughts were counted apart (Gemini's own usage); through LiteLLM, ADK
    puts the reasoning tokens already inside the candidates and the total
    excludes them again.
    """
    if not isinstance(payload, dict):
        return None
    prompt, candidates = _count(payload.get("promptTokenCount")), _count(payload.get("candidatesTokenCount"))
    if prompt is None and candidates is None:
        return None
    prompt, candidates = prompt or 0, candidates or 0
    thoughts = _count(payload.get("thoughtsTokenCount")) or 0
    total = _count(payload.get("totalTokenCount"))
    apart = thoughts and total is not None and total >= prompt + candidates + thoughts
    return ReportedUsage(input_tokens=prompt, output_tokens=candidates + (thoughts if apart else 0),
                         cached_input_tokens=_count(payload.get("cachedContentTokenCount")) or 0,
                         reasoning_tokens=thoughts, model=_text(payload.get("modelVersion")), source=source)


class UsageCollector:
    """The usage reported in one reply: fed every metadata dict of the reply (or of each event of a stream)."""

    def __init__(self) -> None:
        self._assembled: ReportedUsage | None = None  # what the client kept of a stream's events
        self._totals: dict[str, ReportedUsage] = {}  # per shape: the last turn total read
        # per shape: one entry a call, by its event id (or, without one, by the usage itself)
        self._calls: dict[str, dict[str | ReportedUsage, ReportedUsage]] = {ADK: {}, KAGENT: {}}
        self._adk_calls_made = 0  # the ADK LLM calls a Task's history shows for the turn

    def add_metadata(self, metadata: Mapping[str, object]) -> None:
        if not metadata:
            return
        assembled = metadata.get(ASSEMBLED_USAGE_KEY)
        if isinstance(assembled, dict):
            self._assembled = _from_assembled(assembled) or self._assembled
            return
        for source, key, read in ((EXTENSION, USAGE_EXTENSION_URI, from_extension),
                                  (LLM_USAGE, LLM_USAGE_KEY, from_llm_usage)):
            usage = read(metadata.get(key))
            if usage is not None:
                self._totals[source] = usage
        for source, key, event_key, partial_key in ((ADK, ADK_USAGE_KEY, ADK_EVENT_KEY, ADK_PARTIAL_KEY),
                                                    (KAGENT, KAGENT_USAGE_KEY, KAGENT_EVENT_KEY, KAGENT_PARTIAL_KEY)):
            usage = from_genai(metadata.get(key), source)
            if usage is None or metadata.get(partial_key) is True:
                continue
            event = metadata.get(event_key)
            # An event's usage, read again (a partial repeat, the same call in the task and its artifact), replaces
            # what was read for it; without an event id, the same usage read twice is one call.
            self._calls[source][event if isinstance(event, str) and event else usage] = usage

    def add_message(self, message: Message) -> None:
        self.add_metadata(_plain(message.metadata))
        for part in message.parts:
            self.add_metadata(_plain(part.metadata))

    def add_task(self, task: Task) -> None:
        self.add_metadata(_plain(task.metadata))
        self._adk_calls_made = max(self._adk_calls_made, _adk_calls_made(task))
        if task.status.HasField("message"):
            self.add_message(task.status.message)
        for artifact in task.artifacts:
            self.add_metadata(_plain(artifact.metadata))
            for part in artifact.parts:
                self.add_metadata(_plain(part.metadata))

    def add_reply(self, reply: Message | Task) -> None:
        if isinstance(reply, Message):
            self.add_message(reply)
        else:
            self.add_task(reply)

    def add_event(self, event: StreamResponse) -> None:
        """One event of a stream: a Message, a Task, or a status or artifact update (with its own metadata)."""
        if event.HasField("message"):
            self.add_message(event.message)
        elif event.HasField("task"):
            self.add_task(event.task)
        elif event.HasField("status_update"):
            update = event.status_update
            self.add_metadata(_plain(update.metadata))
            if update.status.HasField("message"):
                self.add_message(update.status.message)
        elif event.HasField("artifact_update"):
            update = event.artifact_update
            self.add_metadata(_plain(update.metadata))
            self.add_metadata(_plain(update.artifact.metadata))
            for part in update.artifact.parts:
                self.add_metadata(_plain(part.metadata))

    def usage(self) -> ReportedUsage | None:
        """The turn's usage: the highest-priority shape seen; None when the reply reported none."""
        if self._assembled is not None:
            return self._assembled
        for source in _PRIORITY:
            if source in self._totals:
                return self._totals[source]
            calls = list(self._calls.get(source, {}).values())
            if calls:
                total = calls[0]
                for call in calls[1:]:
                    total = total.plus(call)
                if source == ADK and len(calls) < self._adk_calls_made:
                    total = replace(total, partial=True)
                return total
        return None


def reported_usage(reply: Message | Task) -> ReportedUsage | None:
    """The usage one reply (blocking, or assembled from a stream) reports; None when it reports none."""
    collector = UsageCollector()
    collector.add_reply(reply)
    return collector.usage()


def assembled_note(usage: ReportedUsage) -> AssembledUsage:
    """What an assembled reply keeps under ASSEMBLED_USAGE_KEY: the usage, with the shape it came in."""
    note: AssembledUsage = {**usage.as_extension(), "source": usage.source}
    if usage.partial:
        note["partial"] = True
    return note


def _from_assembled(note: Mapping[str, object]) -> ReportedUsage | None:
    usage = from_extension(note)
    if usage is None:
        return None
    source = note.get("source")
    return replace(usage, source=source if isinstance(source, str) and source in _PRIORITY else EXTENSION,
                   partial=note.get("partial") is True)


def _adk_calls_made(task: Task) -> int:
    """The LLM calls an ADK agent's Task shows for the turn: its agent messages after the last user message
    (history, then the status message) that are not only tool results; 0 for a Task ADK did not write."""
    if not any(key.startswith("adk_") for key in task.metadata.fields):
        return 0
    messages = list(task.history) + ([task.status.message] if task.status.HasField("message") else [])
    turn = messages
    for index, message in enumerate(messages):
        if message.role == Role.ROLE_USER:
            turn = messages[index + 1:]
    return sum(1 for m in turn if m.role == Role.ROLE_AGENT and m.parts
               and not all(_plain(p.metadata).get(ADK_TYPE_KEY) == ADK_TOOL_RESULT for p in m.parts))


def _plain(struct: Struct) -> dict[str, object]:
    """A protobuf Struct as a dict; NaN and infinities kept as floats (json_format refuses them)."""
    return {key: _plain_value(value) for key, value in struct.fields.items()}


def _plain_value(value: Value) -> object:
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return _plain(value.struct_value)
    if kind == "list_value":
        return [_plain_value(item) for item in value.list_value.values]
    return None if kind in (None, "null_value") else getattr(value, kind)
