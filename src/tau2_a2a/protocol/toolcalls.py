"""Tool descriptors going out, tool calls coming back, in every accepted form.

Accepted tool-call forms (see docs/protocol.md); each call records the one it came in:
- ``tau2``: ``{"tool_calls": [{"name" | "tool_name": ..., "arguments": {...}, "id"?: ...}]}``,
  ``{"tool_call": {...}}``, or in text ``{"name": ..., "arguments": ...}``;
- ``openai``: ``{"tool_calls": [{"id": ..., "type": "function",
  "function": {"name": ..., "arguments": ...}}]}``;
- ``openai_legacy``: ``{"function_call": {"name": ..., "arguments": ...}}``;
  each in a data part, or as JSON text: bare, in a ```json fence, or in ``<json>`` tags
  (several fences or tags are several calls);
- ``adk``: a data part whose metadata has ``adk_type: function_call`` and whose data is
  ``{"name": ..., "args": {...}, "id": ...}``, as google-adk's A2A part converter writes it.
A call named ``respond`` with ``{"content": ...}`` is a message to the user.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeGuard

RESPOND_TOOL = "respond"

CallForm = Literal["tau2", "openai", "openai_legacy", "adk"]

# google-adk's A2A part converter names the genai part a data part holds in this metadata key.
ADK_TYPE_KEY = "adk_type"
ADK_FUNCTION_CALL = "function_call"
ADK_FUNCTION_RESPONSE = "function_response"

# The keys that make an object hold tool calls, in data parts and in JSON text alike.
_CALL_KEYS = ("tool_calls", "tool_call", "function_call")
# A ```json fence or <json> tags around JSON in text; one pattern, so blocks come in text order.
_JSON_BLOCK = re.compile(r"<json>(.*?)</json>|```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)

ANSWER_CONVENTION = """\
To call a tool, answer with <json>{"name": TOOL_NAME, "arguments": {...}}</json>; several such \
blocks are several calls, run in order, and all their results come back in the next message. \
To speak to the user, answer with plain text, or with \
<json>{"name": "respond", "arguments": {"content": YOUR_MESSAGE}}</json>. \
A data part {"tool_calls": [{"name": TOOL_NAME, "arguments": {...}}]} works too."""


class MalformedReply(ValueError):
    """The agent's reply does not follow the convention; says what was expected."""


@dataclass
class ToolCallRequest:
    """One tool call as the remote agent asked for it, and the form it used (its result goes back in kind)."""

    name: str
    arguments: dict[str, Any]
    id: str | None = None
    form: CallForm = "tau2"
    # The arguments came as JSON text (a call in a text part, or an "arguments" string): every number is as the
    # agent wrote it, 2 or 2.0, where a data part's object holds only doubles (see `call_arguments`).
    exact_numbers: bool = field(default=False, compare=False)


@dataclass
class DataPart:
    """A data part of a reply with its metadata, which tells an ADK function call from other data."""

    data: object
    metadata: dict[str, object] = field(default_factory=dict)


@dataclass
class ParsedReply:
    """What an agent's reply means for tau2: text for the user and/or tool calls."""

    text: str | None
    tool_calls: list[ToolCallRequest] = field(default_factory=list)


def describe_tools(schemas: Sequence[Mapping[str, object]]) -> str:
    """The tools for agents that read text only: how to answer, then every schema exactly as
    tau2's own agent gets it (OpenAI function schemas), one JSON array, one tool per line."""
    listed = ",\n".join(json.dumps(schema) for schema in schemas)
    return f"{ANSWER_CONVENTION}\nThe tools, as OpenAI function schemas:\n[\n{listed}\n]"


def parse_reply(texts: list[str], data_parts: list[DataPart]) -> ParsedReply:
    """Turn the text and data parts of a reply into text and tool calls."""
    calls: list[ToolCallRequest] = []
    for part in data_parts:
        calls.extend(_calls_from_data_part(part))
    plain_texts: list[str] = []
    for text in texts:
        text_calls = _calls_from_text(text)
        if text_calls is None:
            plain_texts.append(text)
        else:
            calls.extend(text_calls)
    said = [c for c in calls if c.name == RESPOND_TOOL]
    actions = [c for c in calls if c.name != RESPOND_TOOL]
    for call in said:
        content = call.arguments.get("content")
        if not isinstance(content, str):
            raise MalformedReply(
                'expected respond(content: string), got respond arguments '
                f"{_snippet(call.arguments)}"
            )
        plain_texts.append(content)
    said_text = "\n".join(t for t in plain_texts if t.strip()) or None
    return ParsedReply(text=said_text, tool_calls=actions)


def _calls_from_data_part(part: DataPart) -> list[ToolCallRequest]:
    """An ADK function call when the metadata says so; else whatever calls the data holds."""
    if part.metadata.get(ADK_TYPE_KEY) == ADK_FUNCTION_CALL:
        return [_adk_call(part.data)]
    return _calls_from_data(part.data)


def _calls_from_data(data: object) -> list[ToolCallRequest]:
    """Tool calls from one data part or JSON text; data without tool calls is ignored."""
    if not isinstance(data, dict):
        return []
    if "tool_calls" in data:
        raw_calls = data["tool_calls"]
        if not isinstance(raw_calls, list):
            raise MalformedReply(
                f'expected "tool_calls" to be a list of calls, got {_described(raw_calls)}'
            )
        return [_call(raw) for raw in raw_calls]
    if "tool_call" in data:
        return [_call(data["tool_call"])]
    if "function_call" in data:
        return [_legacy_openai_call(data["function_call"])]
    return []


def _calls_from_text(text: str) -> list[ToolCallRequest] | None:
    """Tool calls in a text part, or None when the text is a plain message.

    Every fenced or tagged block that holds a call counts; the whole text counts
    as bare JSON only when no block does.
    """
    blocks = [m.group(1) if m.group(1) is not None else m.group(2) for m in _JSON_BLOCK.finditer(text)]
    found = [value for value in map(_json_value, blocks) if _holds_calls(value)]
    if not found:
        stripped = text.strip()
        if stripped.startswith("{") and stripped.endswith("}") and _holds_calls(bare := _json_value(stripped)):
            found = [bare]
    if not found:
        return None
    calls = [call for value in found for call in _calls_from_json(value)]
    for call in calls:
        call.exact_numbers = True
    return calls


def _json_value(text: str) -> object:
    """The JSON value `text` holds, or None when it holds none (too deep, too long a number)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _holds_calls(value: object) -> TypeGuard[dict[str, Any]]:
    """Whether JSON found in text is meant as tool calls (then it must be well formed)."""
    if not isinstance(value, dict):
        return False
    return _is_keyed(value) or (("name" in value or "tool_name" in value) and "arguments" in value)


def _is_keyed(value: Mapping[str, object]) -> bool:
    return any(key in value for key in _CALL_KEYS)


def _calls_from_json(value: Mapping[str, object]) -> list[ToolCallRequest]:
    """Calls from JSON text: the keyed forms, as in a data part, or one bare call."""
    return _calls_from_data(value) if _is_keyed(value) else [_call(value)]


def _call(raw: object) -> ToolCallRequest:
    """One entry of "tool_calls" (or the "tool_call"): ours, or OpenAI's when it has a "function"."""
    if not isinstance(raw, dict):
        raise MalformedReply(f"expected a tool call object, got {_described(raw)}")
    if "function" in raw:
        return _openai_call(raw)
    name = raw.get("name", raw.get("tool_name"))
    if not _is_name(name):
        raise MalformedReply(
            'expected a tool call with a "name" (or "tool_name") string, got '
            f"{_snippet(raw)}"
        )
    arguments = raw.get("arguments", {})
    return ToolCallRequest(name=name, arguments=_arguments(name, arguments), id=_call_id(raw.get("id")),
                           form="tau2", exact_numbers=isinstance(arguments, str))


def _openai_call(raw: Mapping[str, object]) -> ToolCallRequest:
    function = raw["function"]
    if not isinstance(function, dict) or not _is_name(function.get("name")):
        raise MalformedReply(
            'expected an OpenAI tool call {"type": "function", "function": {"name": ..., "arguments": ...}}, '
            f"got {_snippet(raw)}"
        )
    name, arguments = function["name"], function.get("arguments", {})
    return ToolCallRequest(name=name, arguments=_arguments(name, arguments), id=_call_id(raw.get("id")),
                           form="openai", exact_numbers=isinstance(arguments, str))


def _legacy_openai_call(raw: object) -> ToolCallRequest:
    if not isinstance(raw, dict) or not _is_name(raw.get("name")):
        raise MalformedReply(
            f'expected "function_call" to be {{"name": ..., "arguments": ...}}, got {_described(raw)}'
        )
    name, arguments = raw["name"], raw.get("arguments", {})
    return ToolCallRequest(name=name, arguments=_arguments(name, arguments), form="openai_legacy",
                           exact_numbers=isinstance(arguments, str))


def _adk_call(data: object) -> ToolCallRequest:
    if not isinstance(data, dict) or not _is_name(data.get("name")):
        raise MalformedReply(
            'expected an ADK function call {"name": ..., "args": {...}, "id": ...}, '
            f"got {_described(data)}"
        )
    name = data["name"]
    args = data.get("args")  # ADK leaves out args that are None
    return ToolCallRequest(
        name=name, arguments=_arguments(name, {} if args is None else args), id=_call_id(data.get("id")), form="adk"
    )


def _is_name(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and bool(value)


def _arguments(name: str, value: object) -> dict[str, Any]:
    """A call's arguments: an object, or (OpenAI style) that object as a JSON string."""
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            value = json.loads(value)
        except (ValueError, RecursionError) as error:
            raise MalformedReply(
                f"tool call {name!r}: expected arguments to be an object or its JSON text, "
                f"got a string that is not JSON ({error}): {_snippet(value)}"
            ) from None
    if not isinstance(value, dict):
        raise MalformedReply(
            f"tool call {name!r}: expected arguments to be an object, got {_described(value)}"
        )
    return value


def _call_id(value: object) -> str | None:
    """The call's id as a string; a numeric id from a data part arrives as a double (7.0)."""
    if value is None or value == "":
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _described(value: object) -> str:
    """What came, for error messages: its JSON type, then the value itself."""
    return "null" if value is None else f"{_kind(value)} {_snippet(value)}"


def _kind(value: object) -> str:
    """The JSON name of a value's type."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _snippet(value: object) -> str:
    """A value as compact JSON, cut to a readable length."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    except RecursionError:  # JSON text may nest as deep as the parser allows
        text = f"{_kind(value)} nested too deeply to show"
    return text if len(text) <= 200 else text[:200] + "..."


def restore_types(value: Any, schema: object, defs: object) -> Any:
    """Undo the double-only numbers of data parts, guided by the JSON schema.

    An integral 2.0 becomes 2 where the schema says integer (or says nothing);
    where it says number, the float stays a float, as the golden actions have it.
    Parts of a schema that cannot be read say nothing; nothing else ever changes.
    """
    schema = _resolve(schema, defs)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        kinds = _kinds(schema, defs)
        if value.is_integer() and ("integer" in kinds or not kinds):
            return int(value)
        return value
    if isinstance(value, dict):
        properties = _object(schema.get("properties"))
        extra = _object(schema.get("additionalProperties"))
        return {
            key: restore_types(item, properties.get(key, extra), defs)
            for key, item in value.items()
        }
    if isinstance(value, list):
        items = _object(schema.get("items"))
        return [restore_types(item, items, defs) for item in value]
    return value


def _object(value: object) -> dict[str, object]:
    """A schema keyword's value when it is an object; a tuple `items` or `additionalProperties: true` say nothing."""
    return value if isinstance(value, dict) else {}


def _follow_refs(schema: object, defs: object, seen: frozenset[str]) -> tuple[dict[str, object], frozenset[str]]:
    """The schema a chain of $refs ends at, and the refs followed; a ref seen before (a cycle) says nothing."""
    while isinstance(schema, dict) and "$ref" in schema:
        ref = schema["$ref"]
        if not isinstance(ref, str) or ref in seen or not isinstance(defs, dict):
            return {}, seen
        seen = seen | {ref}
        schema = defs.get(ref.rsplit("/", 1)[-1], {})
    return _object(schema), seen


def _resolve(schema: object, defs: object, seen: frozenset[str] = frozenset()) -> dict[str, object]:
    schema, seen = _follow_refs(schema, defs, seen)
    options = schema.get("anyOf")
    if isinstance(options, list):
        resolved = [_resolve(option, defs, seen) for option in options]
        objects = [o for o in resolved if o.get("type") in ("object", "array")]
        if len(objects) > 1:
            # pydantic's `list[Model | dict]` gives anyOf [Model, free object]: the
            # model, the one option that describes its fields, is the schema to follow.
            described = [o for o in objects if o.get("properties") or o.get("items")]
            objects = described if len(described) == 1 else objects
        if len(objects) == 1:
            return objects[0]
    return schema


def _kinds(schema: object, defs: object, seen: frozenset[str] = frozenset()) -> set[str]:
    """The JSON types a schema allows (empty: it does not say)."""
    schema, seen = _follow_refs(schema, defs, seen)
    options = schema.get("anyOf")
    if isinstance(options, list):
        return set().union(*(_kinds(option, defs, seen) for option in options))
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    return {k for k in kinds if isinstance(k, str)}


def restore_arguments(arguments: dict[str, Any], parameters: Mapping[str, object]) -> dict[str, Any]:
    """`restore_types` for one tool's arguments against its parameters schema."""
    return restore_types(arguments, parameters, parameters.get("$defs", {}))


def call_arguments(call: ToolCallRequest, parameters: Mapping[str, object]) -> dict[str, Any]:
    """A call's arguments with the number types the agent meant: exactly as written when they came as JSON text
    (tau2's own agents parse the model's JSON text the same way, so 2.0 for an integer stays 2.0 and 2 for a
    number stays 2, and tau2 scores them as it scores its own agents'), else restored from the tool's schema."""
    return call.arguments if call.exact_numbers else restore_arguments(call.arguments, parameters)
