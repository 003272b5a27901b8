"""Properties of the reply parser and the argument restorer, over generated inputs.

An agent under test may send anything: the parser must answer with text and
calls, or with MalformedReply saying what it expected and what came, never
with another exception; and every well-formed call, in every form and every
carrier, must come back with the same name and arguments. The restorer must
never change anything but integral floats, and turn those into ints exactly
where the schema allows: tau2 hashes the database, so 2 and 2.0 differ.

Hypothesis draws a seed and a text for each example, and the shapes are built
from `random.Random(seed)` in plain Python: nested strategies cost milliseconds
per example, and each test runs 10,000 examples. A failure names its seed and
text, so it replays; each one found goes into the test's @example list, which
only grows (tests/conftest.py makes CI draw the same examples every run).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from typing import Any

from a2a.helpers import new_data_part, new_text_part
from a2a.types import Message, Part, Role
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tau2_a2a.protocol.messages import reply_parts
from tau2_a2a.protocol.toolcalls import (
    RESPOND_TOOL,
    DataPart,
    MalformedReply,
    parse_reply,
    restore_arguments,
    restore_types,
)
from tests.support.values import as_wire, typed

MANY = settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FORMS = ["tau2", "openai", "openai_legacy", "adk"]
ADK_CALL = {"adk_type": "function_call"}
KEYS = ["name", "tool_name", "arguments", "args", "id", "type", "function", "tool_calls", "tool_call",
        "function_call", "content", "role", "adk_type"]
LEAVES: list[Any] = [
    None, True, False, 0, 1, -7, 2**53, 2.0, 0.5, -0.0, 1e308, math.inf, -math.inf, math.nan,
    "", " ", "respond", "get_user_details", "function", "{", "[1]", "null", '{"a": 1}', "<json>", "```",
    [], {},
]
# Values JSON can carry exactly: no NaN, no infinity, integers a double holds.
JSON_LEAVES: list[Any] = [None, True, False, 0, 1, -7, 2**53, -(2**53), 2.0, 0.5, -2.5, 1e300, "", "x", "2", "é ü"]

drawn_text = st.text(max_size=10)
seeds = st.integers(min_value=0, max_value=2**64 - 1)
# Regression examples (seed, text): edge texts that once mattered (JSON and wrapper syntax, a NUL, non-ASCII)
# and seeds kept from earlier runs. Add each failure hypothesis reports here; never remove one.
REGRESSIONS = [(0, ""), (1, "{"), (2, "}"), (3, "<json>"), (4, "```"), (5, "\x00"), (6, "é"), (7, "null"),
               (8, "respond"), (9, "2.0")]


def regressions(test: Callable[..., None]) -> Callable[..., None]:
    """The REGRESSIONS as @example cases of a (seed, text) property."""
    for seed, text in REGRESSIONS:
        test = example(seed, text)(test)
    return test


def any_json(rng: random.Random, text: str, depth: int = 2, leaves: list[Any] = LEAVES) -> Any:
    """Any value a data part or JSON text may hold."""
    roll = rng.random()
    if depth == 0 or roll < 0.5:
        return rng.choice([*leaves, text])
    if roll < 0.75:
        return [any_json(rng, text, depth - 1, leaves) for _ in range(rng.randint(0, 3))]
    return {rng.choice([*KEYS, text]): any_json(rng, text, depth - 1, leaves) for _ in range(rng.randint(0, 3))}


# -- the parser: any input ------------------------------------------------------------


def usually(rng: random.Random, text: str, good: Any) -> Any:
    """The well-formed value most of the time, anything at all otherwise."""
    return good if rng.random() < 0.75 else any_json(rng, text)


def some_fields(rng: random.Random, text: str, wanted: dict[str, Any]) -> dict[str, Any]:
    """Most of the wanted fields, each usually right."""
    return {key: usually(rng, text, value) for key, value in wanted.items() if rng.random() < 0.85}


def near_miss(rng: random.Random, text: str) -> tuple[Any, dict[str, Any]]:
    """A tool call in one of the accepted forms with fields missing or wrong, as (data, part metadata)."""
    name = rng.choice(["get_user_details", RESPOND_TOOL, text])
    argument_object = {rng.choice([*KEYS, text]): any_json(rng, text, 1) for _ in range(rng.randint(0, 2))}
    arguments = rng.choice([argument_object, json.dumps(argument_object), "", "{", "[" * 5000, any_json(rng, text)])
    call = {"name": name, "arguments": arguments, "id": rng.choice(LEAVES)}
    form = rng.randrange(6)
    if form == 0:
        return {"tool_calls": usually(rng, text, [some_fields(rng, text, call) for _ in range(rng.randint(0, 2))])}, {}
    if form == 1:
        return {"tool_call": usually(rng, text, some_fields(rng, text, {"tool_name": name, "arguments": arguments}))}, {}
    if form == 2:
        function = usually(rng, text, some_fields(rng, text, {"name": name, "arguments": arguments}))
        entry = some_fields(rng, text, {"id": call["id"], "type": "function", "function": function})
        return {"tool_calls": [entry]}, {}
    if form == 3:
        return {"function_call": usually(rng, text, some_fields(rng, text, {"name": name, "arguments": arguments}))}, {}
    if form == 4:
        adk = usually(rng, text, some_fields(rng, text, {"name": name, "args": argument_object, "id": call["id"]}))
        return adk, {"adk_type": rng.choice(["function_call", "function_call", "function_response", text])}
    return some_fields(rng, text, call), rng.choice([{}, {text: rng.choice(LEAVES)}])


WRAPPERS = ["{}", "```json\n{}\n```", "```\n{}```", "<json>{}</json>", "Sure. <JSON>\n{}\n</JSON> Done.", "x {} y"]


def reply_text(rng: random.Random, text: str) -> str:
    """Prose, or near-miss calls as JSON text in one or two wrappers."""
    if rng.random() < 0.2:
        return text
    blocks = [rng.choice(WRAPPERS).replace("{}", json.dumps(near_miss(rng, text)[0]), 1) for _ in range(rng.randint(1, 2))]
    return rng.choice([" ", "\n", text]).join(blocks)


@MANY
@regressions
@given(seeds, drawn_text)
def test_parse_reply_answers_or_says_what_was_expected(seed: int, text: str) -> None:
    """Text and calls, or MalformedReply naming what it expected and what came; nothing else escapes."""
    rng = random.Random(seed)
    texts = [reply_text(rng, text) for _ in range(rng.randint(0, 2))]
    data_parts = [DataPart(*near_miss(rng, text)) for _ in range(rng.randint(0, 2))]
    try:
        reply = parse_reply(texts, data_parts)
    except MalformedReply as error:
        message = str(error)
        assert "expected" in message and "got" in message, message
        return
    assert reply.text is None or reply.text.strip()
    for call in reply.tool_calls:
        assert isinstance(call.name, str) and call.name and call.name != RESPOND_TOOL
        assert isinstance(call.arguments, dict)
        assert call.id is None or isinstance(call.id, str)
        assert call.form in FORMS


# -- the parser: well-formed calls in every form round-trip ----------------------------

Call = tuple[str, str, str, dict[str, Any], "str | None", bool]  # form, carrier, name, arguments, id, as JSON text
TEXT_WRAPPERS = {"bare": "{}", "fence": "Checking.\n```json\n{}\n```", "tags": "One moment. <json>{}</json>"}


def safe(text: str) -> str:
    """`text` where a fence or a <json> block may hold it: it cannot contain the closing delimiter."""
    return text.replace("```", "`").replace("</json>", "").replace("</JSON>", "")


def arguments_of(rng: random.Random, text: str) -> dict[str, Any]:
    return {rng.choice(["user_id", "amount", safe(text)]): any_json(rng, safe(text), 2, JSON_LEAVES)
            for _ in range(rng.randint(0, 3))}


def well_formed_call(rng: random.Random, text: str) -> Call:
    form = rng.choice(FORMS)
    carrier = "data" if form == "adk" else rng.choice(["data", *TEXT_WRAPPERS])
    name = rng.choice(["get_user_details", "book_reservation", safe(text)]) or "x"
    name = "respond_" if name == RESPOND_TOOL else name
    call_id = None if form == "openai_legacy" else rng.choice([None, "call_1", safe(text) or None])
    as_text = form in ("openai", "openai_legacy") and rng.random() < 0.5
    return form, carrier, name, arguments_of(rng, text), call_id, as_text


def encoded(form: str, name: str, args: dict[str, Any], call_id: str | None, as_text: bool) -> tuple[Any, dict]:
    """One call as (data, part metadata) in its form."""
    with_id = {"id": call_id} if call_id else {}
    sent_args: Any = json.dumps(args) if as_text else args
    if form == "adk":
        return {"name": name, "args": args, **with_id}, ADK_CALL
    if form == "openai_legacy":
        return {"function_call": {"name": name, "arguments": sent_args}}, {}
    if form == "openai":
        return {"tool_calls": [{**with_id, "type": "function", "function": {"name": name, "arguments": sent_args}}]}, {}
    return {"tool_calls": [{"name": name, "arguments": args, **with_id}]}, {}


@MANY
@regressions
@given(seeds, drawn_text)
def test_well_formed_calls_round_trip_in_every_form_and_carrier(seed: int, text: str) -> None:
    """Each call sent as a data part or as JSON text (bare, fenced, tagged) comes back with its
    name, arguments, id and form; arguments in data parts arrive as doubles, in JSON text exactly."""
    rng = random.Random(seed)
    calls = [well_formed_call(rng, text) for _ in range(rng.randint(1, 3))]
    data_parts: list[Part] = []
    text_parts: list[Part] = []
    for form, carrier, name, args, call_id, as_text in calls:
        value, metadata = encoded(form, name, args, call_id, as_text)
        if carrier == "data":
            part = new_data_part(value)
            part.metadata.update(metadata)
            data_parts.append(part)
        else:
            text_parts.append(new_text_part(TEXT_WRAPPERS[carrier].replace("{}", json.dumps(value), 1)))
    # Interleaved at random: the parser reads data parts first, then text parts, each in their order.
    slots = [True] * len(data_parts) + [False] * len(text_parts)
    rng.shuffle(slots)
    parts = [data_parts.pop(0) if is_data else text_parts.pop(0) for is_data in slots]
    reply = parse_reply(*reply_parts(Message(role=Role.ROLE_AGENT, message_id="m", parts=parts)))
    ordered = [c for c in calls if c[1] == "data"] + [c for c in calls if c[1] != "data"]
    expected = [
        (name, typed(as_wire(args) if carrier == "data" and not as_text else args), call_id, form)
        for form, carrier, name, args, call_id, as_text in ordered
    ]
    assert reply.text is None
    assert [(c.name, typed(c.arguments), c.id, c.form) for c in reply.tool_calls] == expected


@MANY
@regressions
@given(seeds, drawn_text)
def test_several_tagged_calls_in_one_text_come_in_order(seed: int, text: str) -> None:
    """The tools text teaches one <json> block per call: blocks among prose are the calls, in order."""
    rng = random.Random(seed)
    calls = [well_formed_call(rng, text)[2:4] for _ in range(rng.randint(1, 4))]
    prose = safe(text).replace("<", "")
    message = "".join(f"{prose}<json>{json.dumps({'name': name, 'arguments': args})}</json>" for name, args in calls)
    reply = parse_reply([message + prose], [])
    assert reply.text is None
    assert [(c.name, typed(c.arguments)) for c in reply.tool_calls] == [(name, typed(args)) for name, args in calls]


# -- the restorer: schemas with the types known -----------------------------------------

ValueMaker = Callable[[random.Random], Any]


def nullable(rng: random.Random, schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Optional[...] in the spellings pydantic and hand-written schemas use; True when null is allowed."""
    style = rng.randrange(3)
    if style == 0:
        return schema, False
    if style == 1:
        return {"anyOf": [schema, {"type": "null"}]}, True
    return {**schema, "type": [schema["type"], "null"]}, True


def typed_schema(rng: random.Random, defs: dict[str, Any], depth: int) -> tuple[dict[str, Any], ValueMaker]:
    """A schema and a maker of values of it, as tau2 holds them (integers as ints, numbers as floats)."""
    kind = rng.choice(["integer", "number", "string", "boolean", "untyped"]
                      + (["object", "object", "array", "ref"] if depth else []))
    if kind in ("integer", "number", "string"):
        schema, allows_null = nullable(rng, {"type": kind})
        values = {
            "integer": [0, 1, -3, 12, 2**53],
            "number": [0.0, 2.0, -1.0, 0.5, 1e300, 250.75],  # integral floats too: they must stay floats
            "string": ["", "2", "2.0", "x"],
        }[kind] + ([None] if allows_null else [])
        return schema, lambda r: r.choice(values)
    if kind == "boolean":
        return {"type": "boolean"}, lambda r: r.choice([True, False])
    if kind == "untyped":  # says nothing: an integral double is taken for an int
        return {}, lambda r: r.choice([0, 5, -2, 0.5, "a", None, True])
    if kind == "array":
        items, make_item = typed_schema(rng, defs, depth - 1)
        return {"type": "array", "items": items}, lambda r: [make_item(r) for _ in range(r.randint(0, 3))]
    if kind == "ref":
        name = f"Model{len(defs)}"
        defs[name] = {}  # taken before the model is built, so a nested ref gets another name
        model, make = typed_schema(rng, defs, depth - 1)
        defs[name] = model
        ref = {"$ref": f"#/$defs/{name}"}
        if model.get("type") == "object" and model["properties"] and rng.random() < 0.5:
            # pydantic's `Model | dict`: the model, the option that describes fields, is the schema to follow
            return {"anyOf": [ref, {"type": "object", "additionalProperties": True}]}, make
        return ref, make
    fields = {f"f{i}": typed_schema(rng, defs, depth - 1) for i in range(rng.randint(0, 3))}
    schema: dict[str, Any] = {"type": "object", "properties": {k: s for k, (s, _) in fields.items()}}
    extra: ValueMaker | None = None
    if rng.random() < 0.3:
        schema["additionalProperties"], extra = typed_schema(rng, defs, depth - 1)

    def make_object(r: random.Random) -> dict[str, Any]:
        value = {k: make(r) for k, (_, make) in fields.items() if r.random() < 0.9}
        if extra is not None:
            value.update({f"extra{i}": extra(r) for i in range(r.randint(0, 2))})
        return value

    return schema, make_object


@MANY
@example(0)
@example(1)
@example(2)
@given(seeds)
def test_restore_arguments_gives_back_the_types_tau2_holds(seed: int) -> None:
    """Arguments sent through a data part (every number a double) come back exactly: ints where
    the schema says integer or nothing, floats (integral ones too) where it says number."""
    rng = random.Random(seed)
    defs: dict[str, Any] = {}
    fields = {f"a{i}": typed_schema(rng, defs, 3) for i in range(rng.randint(1, 4))}
    parameters: dict[str, Any] = {"type": "object", "properties": {k: s for k, (s, _) in fields.items()}}
    if defs:
        parameters["$defs"] = defs
    arguments = {k: make(rng) for k, (_, make) in fields.items()}
    assert typed(restore_arguments(as_wire(arguments), parameters)) == typed(arguments)


# -- the restorer: any schema -------------------------------------------------------------

SCHEMA_KEYS = ["type", "properties", "items", "anyOf", "$ref", "additionalProperties", "required"]
SCHEMA_LEAVES: list[Any] = [
    "integer", "number", "string", "object", "array", "null", "#/$defs/A", "#/$defs/B", "C", 3, None, True,
    ["integer", "null"], ["number", "integer"], [{"type": "integer"}], {"type": "integer"}, {"type": "number"}, {},
]


def any_schema(rng: random.Random, depth: int = 3) -> Any:
    """A schema that may say anything: sound, unreadable, or $refs that cycle."""
    roll = rng.random()
    if depth == 0 or roll < 0.3:
        return rng.choice(SCHEMA_LEAVES)
    if roll < 0.4:
        return [any_schema(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    schema: dict[str, Any] = {}
    for key in rng.sample(SCHEMA_KEYS, rng.randint(1, 3)):
        if key in ("properties",):
            schema[key] = {rng.choice(KEYS): any_schema(rng, depth - 1) for _ in range(rng.randint(0, 3))}
        elif key == "anyOf":
            schema[key] = [any_schema(rng, depth - 1) for _ in range(rng.randint(0, 3))]
        else:
            schema[key] = any_schema(rng, depth - 1)
    return schema


def changed_only_integral_floats(before: Any, after: Any) -> bool:
    """Same shape and leaves, except integral floats that may have become equal ints."""
    if isinstance(before, dict):
        return isinstance(after, dict) and list(before) == list(after) and all(
            changed_only_integral_floats(before[k], after[k]) for k in before
        )
    if isinstance(before, list):
        return isinstance(after, list) and len(before) == len(after) and all(
            changed_only_integral_floats(b, a) for b, a in zip(before, after)
        )
    if isinstance(before, float):
        if isinstance(after, float):
            return after == before or (math.isnan(before) and math.isnan(after))
        return type(after) is int and before.is_integer() and after == before
    return type(after) is type(before) and after == before


@MANY
@regressions
@given(seeds, drawn_text)
def test_restore_types_never_changes_anything_but_integral_floats(seed: int, text: str) -> None:
    """Whatever the schema (unreadable parts, $ref cycles, unions of anything): no exception, the
    same shape, only integral floats turned into ints, and restoring twice changes nothing more."""
    rng = random.Random(seed)
    value = as_wire(any_json(rng, text, 3)) if rng.random() < 0.5 else any_json(rng, text, 3)
    schema = any_schema(rng)
    defs = {name: any_schema(rng) for name in rng.sample(["A", "B", "C"], rng.randint(0, 3))}
    defs = defs if rng.random() < 0.9 else any_schema(rng)
    restored = restore_types(value, schema, defs)
    assert changed_only_integral_floats(value, restored)
    assert typed(restore_types(restored, schema, defs)) == typed(restored)

