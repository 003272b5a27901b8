"""tau2 turns <-> A2A parts, both directions, no I/O.

The client encodes what the agent under test receives; reference agents decode
it with the same functions, so the convention lives in one place.
Every part carries ``metadata["tau2_kind"]`` so that system instructions are
never mixed into the user's words.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from a2a.helpers import get_text_parts, new_data_part, new_text_part
from a2a.types import Message, Part, Task
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict

from tau2_a2a.protocol.toolcalls import (
    ADK_FUNCTION_RESPONSE,
    ADK_TYPE_KEY,
    CallForm,
    DataPart,
    MalformedReply,
    ToolCallRequest,
    describe_tools,
    restore_arguments,
)

if TYPE_CHECKING:
    from a2a.server.agent_execution import RequestContext
    from google.protobuf.struct_pb2 import Value

KIND = "tau2_kind"
SYSTEM = "system"
TOOLS = "tools"
USER = "user"
TOOL_RESULTS = "tool_results"
TOOL_CALLS = "tool_calls"
HISTORY = "history"
SEED = "tau2_seed"
USAGE_METADATA_KEY = "llm_usage"  # optional reply metadata: the agent's own LLM usage and cost


@dataclass
class ToolResult:
    """The outcome of one tool call, as tau2's environment produced it.

    ``form`` is the form the call came in: a result of an ADK function call also
    goes back as an ADK function response, which is what an ADK agent waits for.
    """

    id: str
    name: str
    content: str
    error: bool = False
    form: CallForm = "tau2"


@dataclass
class IncomingTurn:
    """What an agent under test reads from one message (the decoder's view)."""

    system: str | None = None
    tools: list[dict[str, Any]] | None = None
    history: list[dict[str, Any]] | None = None
    seed: int | None = None
    user_text: str | None = None
    tool_results: list[ToolResult] = field(default_factory=list)


def mark(kind: str, part: Part) -> Part:
    """`part`, marked with what it carries (its `tau2_kind`)."""
    part.metadata.update({KIND: kind})
    return part


def conversation_start(
    system_prompt: str,
    tool_schemas: list[dict[str, object]],
    turn_parts: list[Part],
    history: list[dict[str, object]],
    seed: int | None = None,
) -> list[Part]:
    """Parts of a simulation's first message.

    The system prompt (instructions and ``<policy>``), the tools as text (how to
    answer, then the full schemas as JSON) and as data, the conversation so far
    (tau2's greeting, or a task's prior history), then the turn itself (the
    user's words, or tool results). tau2's per-trial seed, when it has one,
    rides in the system part's metadata, so an agent can sample as tau2's
    native agent would.
    """
    tools_text = f"<tools>\n{describe_tools(tool_schemas)}\n</tools>"
    system = mark(SYSTEM, new_text_part(system_prompt))
    if seed is not None:
        system.metadata.update({SEED: seed})
    return [
        system,
        mark(TOOLS, new_text_part(tools_text)),
        mark(TOOLS, new_data_part({"tools": tool_schemas})),
        mark(HISTORY, new_data_part({"history": history})),
        *turn_parts,
    ]


def user_turn(text: str) -> list[Part]:
    """Parts of a later message carrying the user's words."""
    return [mark(USER, new_text_part(text))]


def tool_results_turn(results: list[ToolResult]) -> list[Part]:
    """Parts of a message carrying all tool results of one turn: text and data,
    then an ADK function response for each result of a call that came in ADK's form."""
    text = "\n".join(
        f"Tool result{' (error)' if r.error else ''} for {r.name} (call {r.id}):\n{r.content}"
        for r in results
    )
    data = {
        "tool_results": [
            {"id": r.id, "name": r.name, "content": r.content, "error": r.error}
            for r in results
        ]
    }
    parts = [mark(TOOL_RESULTS, new_text_part(text)), mark(TOOL_RESULTS, new_data_part(data))]
    return parts + [_adk_function_response(r) for r in results if r.form == "adk"]


def _adk_function_response(result: ToolResult) -> Part:
    """A data part google-adk's A2A part converter reads back as a genai FunctionResponse."""
    response = {"id": result.id, "name": result.name, "response": {"result": result.content}}
    part = mark(TOOL_RESULTS, new_data_part(response))
    part.metadata.update({ADK_TYPE_KEY: ADK_FUNCTION_RESPONSE})
    return part


def sent_message(context: RequestContext) -> tuple[Message, str]:
    """The message of a SendMessage an agent serves, and its context id (a2a-sdk's handler sets both)."""
    if context.message is None or not context.context_id:
        raise InvalidParamsError(message="SendMessage carries no message in a context")
    return context.message, context.context_id


def read_turn(message: Message) -> IncomingTurn:
    """Decode a message built by the functions above (the agent-side view)."""
    turn = IncomingTurn()
    adk_answered: set[str] = set()  # ids of calls answered as ADK function responses too
    for part in message.parts:
        kind = part.metadata[KIND] if KIND in part.metadata else USER
        if part.HasField("text"):
            if kind == SYSTEM:
                turn.system = part.text
                if SEED in part.metadata:
                    turn.seed = int(part.metadata[SEED])
            elif kind == USER:
                turn.user_text = part.text if turn.user_text is None else turn.user_text + "\n" + part.text
        elif part.HasField("data"):
            data = MessageToDict(part.data)
            adk_type = part.metadata[ADK_TYPE_KEY] if ADK_TYPE_KEY in part.metadata else None
            if adk_type == ADK_FUNCTION_RESPONSE and isinstance(data, dict):
                adk_answered.add(str(data.get("id", "")))
            elif kind == TOOLS and isinstance(data, dict):
                tools = data.get("tools")
                turn.tools = restore_schema_numbers(tools) if isinstance(tools, list) else tools
            elif kind == HISTORY and isinstance(data, dict):
                turn.history = data.get("history")
            elif kind == TOOL_RESULTS and isinstance(data, dict):
                turn.tool_results = [
                    ToolResult(
                        id=str(r.get("id", "")), name=str(r.get("name", "")),
                        content=str(r.get("content", "")), error=bool(r.get("error", False)),
                    )
                    for r in data.get("tool_results", [])
                    if isinstance(r, dict)
                ]
    if turn.history:
        turn.history = _restore_history(turn.history, turn.tools or [])
    turn.tool_results = [replace(r, form="adk") if r.id in adk_answered else r for r in turn.tool_results]
    return turn


# Keys whose values are instances of the schema's own type, not schema numbers.
_INSTANCE_KEYS = ("default", "const", "enum", "examples")


def restore_schema_numbers(value: Any) -> Any:
    """Tool schemas as sent: data parts carry every number as a double.

    Integral numbers in a JSON schema are counts and bounds (``maxLength``,
    ``minimum``, an integer's ``default``), so they come back as ints; the
    ``default``/``const``/``enum``/``examples`` of a schema typed ``number``
    keep their floats.
    """
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [restore_schema_numbers(item) for item in value]
    if not isinstance(value, dict):
        return value
    kind = value.get("type")  # a property may itself be called "type": only strings count
    kinds = {k for k in (kind if isinstance(kind, list) else [kind]) if isinstance(k, str)}
    number_only = "number" in kinds and "integer" not in kinds
    return {
        key: item if number_only and key in _INSTANCE_KEYS else restore_schema_numbers(item)
        for key, item in value.items()
    }


def _restore_history(history: list[Any], tools: Sequence[object]) -> list[Any]:
    """Tool-call arguments in the history, typed again by their tools' schemas."""
    parameters = {
        t["function"]["name"]: t["function"].get("parameters", {})
        for t in tools
        if isinstance(t, dict) and isinstance(t.get("function"), dict) and "name" in t["function"]
    }
    restored = []
    for entry in history:
        calls = entry.get("tool_calls") if isinstance(entry, dict) else None
        if isinstance(calls, list):
            entry = {
                **entry,
                "tool_calls": [
                    {**call, "arguments": restore_arguments(call["arguments"], parameters.get(call.get("name"), {}))}
                    if isinstance(call, dict) and isinstance(call.get("arguments"), dict)
                    else call
                    for call in calls
                ],
            }
        restored.append(entry)
    return restored


def tool_calls_reply(calls: list[ToolCallRequest], arguments_as_text: bool = False) -> list[Part]:
    """Parts of an agent's reply asking for tool calls (the canonical form). With `arguments_as_text` each
    call's arguments go as their JSON text, so every number keeps the form it has (2 or 2.0): a data part's
    object carries only doubles, whose types tau2 restores from the tool's schema."""
    payload = [
        {**({"id": c.id} if c.id else {}), "name": c.name,
         "arguments": json.dumps(c.arguments) if arguments_as_text else c.arguments}
        for c in calls
    ]
    return [mark(TOOL_CALLS, new_data_part({"tool_calls": payload}))]


def reply_parts(reply: Message | Task) -> tuple[list[str], list[DataPart]]:
    """Text and data parts of an agent's reply, whether a Message or a Task: what
    `parse_reply` reads. A data part keeps its metadata, which marks ADK function calls.
    """
    parts = answer_parts(reply)
    data_parts = [
        DataPart(data=_plain(part.data), metadata=MessageToDict(part.metadata))
        for part in parts
        if part.HasField("data")
    ]
    return get_text_parts(parts), data_parts


def answer_parts(reply: Message | Task) -> list[Part]:
    """The A2A parts that carry an agent's reply: a Message's, or a Task's status message and artifacts."""
    if isinstance(reply, Message):
        return list(reply.parts)
    parts = list(reply.status.message.parts) if reply.status.HasField("message") else []
    for artifact in reply.artifacts:
        parts.extend(artifact.parts)
    return parts


def _plain(data: Value) -> object:
    """A data part's value as plain JSON values."""
    try:
        return MessageToDict(data)
    except ValueError as error:  # protobuf refuses NaN and Infinity, which JSON cannot carry
        raise MalformedReply(f"expected data parts JSON can carry, got one it cannot ({error})") from None


def reply_content(reply: Message | Task) -> tuple[list[str], list[object]]:
    """Text and data of an agent's reply without part metadata: what its size and logs count."""
    texts, data_parts = reply_parts(reply)
    return texts, [part.data for part in data_parts]


def part_size_text(part: Part) -> str:
    """The text a tokenizer counts for one part: its text, or its data as sorted JSON."""
    if part.HasField("text"):
        return part.text
    if part.HasField("data"):
        return json.dumps(_plain(part.data), sort_keys=True)
    return ""
