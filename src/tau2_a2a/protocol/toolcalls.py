"""Tool descriptors going out, tool calls coming back, in every accepted form.

Accepted tool-call forms (see docs/protocol.md):
- a data part ``{"tool_calls": [{"name" | "tool_name": ..., "arguments": {...}, "id"?: ...}]}``
- JSON in text: ``{"name": ..., "arguments": ...}``, ``{"tool_call": {...}}`` or
  ``{"tool_calls": [...]}``, bare, in a ```json fence, or in ``<json>`` tags.
A call named ``respond`` with ``{"content": ...}`` is a message to the user.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

RESPOND_TOOL = "respond"

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_JSON_TAGS = re.compile(r"<json>(.*?)</json>", re.DOTALL | re.IGNORECASE)


class MalformedReply(ValueError):
    """The agent's reply does not follow the convention; says what was expected."""


@dataclass
class ToolCallRequest:
    """One tool call as the remote agent asked for it."""

    name: str
    arguments: dict[str, Any]
    id: str | None = None


@dataclass
class ParsedReply:
    """What an agent's reply means for tau2: text for the user and/or tool calls."""

    text: str | None
    tool_calls: list[ToolCallRequest] = field(default_factory=list)


def describe_tools(schemas: list[dict[str, Any]]) -> str:
    """Readable tool list for agents that read text only."""
    lines = []
    for schema in schemas:
        function = schema["function"]
        params = function.get("parameters", {}).get("properties", {})
        required = set(function.get("parameters", {}).get("required", []))
        args = ", ".join(
            f"{name}{'' if name in required else '?'}: {_type_name(spec)}"
            for name, spec in params.items()
        )
        description = " ".join(function.get("description", "").split())
        lines.append(f"- {function['name']}({args}): {description}")
    return "\n".join(lines)


def _type_name(spec: dict[str, Any]) -> str:
    if "type" in spec:
        return str(spec["type"])
    if "$ref" in spec:
        return spec["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in spec:
        return " | ".join(_type_name(option) for option in spec["anyOf"])
    return "any"


def parse_reply(texts: list[str], datas: list[Any]) -> ParsedReply:
    """Turn the text and data parts of a reply into text and tool calls."""
    calls: list[ToolCallRequest] = []
    for data in datas:
        calls.extend(_calls_from_data(data))
    plain_texts = []
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
    text = "\n".join(t for t in plain_texts if t.strip()) or None
    return ParsedReply(text=text, tool_calls=actions)


def _calls_from_data(data: Any) -> list[ToolCallRequest]:
    """Tool calls from one data part; data without tool calls is ignored."""
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
    return []


def _calls_from_text(text: str) -> list[ToolCallRequest] | None:
    """Tool calls in a text part, or None when the text is a plain message."""
    for candidate in _json_candidates(text):
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            if "tool_calls" in value or "tool_call" in value:
                return _calls_from_data(value)
            if ("name" in value or "tool_name" in value) and "arguments" in value:
                return [_call(value)]
    return None


def _json_candidates(text: str) -> list[str]:
    stripped = text.strip()
    candidates = [m.group(1).strip() for m in _FENCE.finditer(text)]
    candidates += [m.group(1).strip() for m in _JSON_TAGS.finditer(text)]
    if stripped.startswith("{") and stripped.endswith("}"):
        candidates.append(stripped)
    return candidates


def _call(raw: Any) -> ToolCallRequest:
    if not isinstance(raw, dict):
        raise MalformedReply(f"expected a tool call object, got {_described(raw)}")
    name = raw.get("name", raw.get("tool_name"))
    if not isinstance(name, str) or not name:
        raise MalformedReply(
            'expected a tool call with a "name" (or "tool_name") string, got '
            f"{_snippet(raw)}"
        )
    arguments = raw.get("arguments", {})
    if isinstance(arguments, str):  # OpenAI style: arguments as a JSON string
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as error:
            raise MalformedReply(
                f"tool call {name!r}: arguments are not valid JSON ({error})"
            ) from None
    if not isinstance(arguments, dict):
        raise MalformedReply(
            f"tool call {name!r}: expected arguments to be an object, "
            f"got {_described(arguments)}"
        )
    return ToolCallRequest(name=name, arguments=arguments, id=_call_id(raw.get("id")))


def _call_id(value: Any) -> str | None:
    """The call's id as a string; a numeric id from a data part arrives as a double (7.0)."""
    if value is None or value == "":
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _described(value: Any) -> str:
    """What came, for error messages: its JSON type, then the value itself."""
    return "null" if value is None else f"{_kind(value)} {_snippet(value)}"


def _kind(value: Any) -> str:
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


def _snippet(value: Any) -> str:
    """A value as compact JSON, cut to a readable length."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def restore_types(value: Any, schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    """Undo the double-only numbers of data parts, guided by the JSON schema.

    An integral 2.0 becomes 2 where the schema says integer (or says nothing);
    where it says number, the float stays a float, as the golden actions have it.
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
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        extra = extra if isinstance(extra, dict) else {}
        return {
            key: restore_types(item, properties.get(key, extra), defs)
            for key, item in value.items()
        }
    if isinstance(value, list):
        items = schema.get("items", {})
        return [restore_types(item, items if isinstance(items, dict) else {}, defs) for item in value]
    return value


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while isinstance(schema, dict) and "$ref" in schema:
        schema = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
    if isinstance(schema, dict) and "anyOf" in schema:
        options = [_resolve(o, defs) for o in schema["anyOf"]]
        objects = [o for o in options if o.get("type") in ("object", "array")]
        if len(objects) > 1:
            # pydantic's `list[Model | dict]` gives anyOf [Model, free object]: the
            # model, the one option that describes its fields, is the schema to follow.
            described = [o for o in objects if o.get("properties") or o.get("items")]
            objects = described if len(described) == 1 else objects
        if len(objects) == 1:
            return objects[0]
    return schema if isinstance(schema, dict) else {}


def _kinds(schema: dict[str, Any], defs: dict[str, Any]) -> set[str]:
    if "anyOf" in schema:
        return set().union(*(_kinds(_resolve(o, defs), defs) for o in schema["anyOf"]))
    kind = schema.get("type")
    if isinstance(kind, list):
        return set(kind)
    return {kind} if kind else set()


def restore_arguments(arguments: dict[str, Any], parameters: dict[str, Any]) -> dict[str, Any]:
    """`restore_types` for one tool's arguments against its parameters schema."""
    return restore_types(arguments, parameters, parameters.get("$defs", {}))
