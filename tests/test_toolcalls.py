"""The tool-call convention: every form an agent may answer in, and the types tau2 gets back.

A reply the parser misreads becomes a wrong action in tau2's trajectory, and an
argument of the wrong numeric type changes the database hash the reward is
computed from, so each form and each type rule is pinned down exactly.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest
from tau2.registry import registry

import tau2_a2a  # noqa: F401  (registers with tau2 before its registry is used)
from tau2_a2a.protocol.toolcalls import (
    MalformedReply,
    ParsedReply,
    ToolCallRequest,
    describe_tools,
    parse_reply,
    restore_arguments,
)
from tests.conftest import typed

LOOKUP = {"name": "get_user_details", "arguments": {"user_id": "sara_doe_496"}}
LOOKUP_CALL = ToolCallRequest(name="get_user_details", arguments={"user_id": "sara_doe_496"})


@cache
def _schemas(domain: str) -> tuple[dict[str, Any], ...]:
    env = registry.get_env_constructor(domain)()
    return tuple(tool.openai_schema for tool in env.get_tools())


def schemas(domain: str) -> list[dict[str, Any]]:
    """The tool schemas tau2 gives the agent in `domain` (copied: tests must not share them)."""
    return json.loads(json.dumps(_schemas(domain)))


def parameters(domain: str, tool: str) -> dict[str, Any]:
    for schema in schemas(domain):
        if schema["function"]["name"] == tool:
            return schema["function"]["parameters"]
    raise AssertionError(f"{domain} has no tool {tool}")


def as_wire(value: Any) -> Any:
    """What a data part does to numbers: every one arrives as a double."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, dict):
        return {k: as_wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_wire(v) for v in value]
    return value


# -- data parts ---------------------------------------------------------------------


def test_data_part_tool_calls_with_name_arguments_and_id() -> None:
    """The canonical form: ids are kept so tau2 can pair results with calls."""
    reply = parse_reply([], [{"tool_calls": [{**LOOKUP, "id": "call_7"}]}])
    assert reply == ParsedReply(
        text=None,
        tool_calls=[ToolCallRequest(name="get_user_details", arguments={"user_id": "sara_doe_496"}, id="call_7")],
    )


def test_data_part_tool_name_spelling_and_missing_id() -> None:
    """Some frameworks say tool_name; a call without id gets none (tau2 assigns one)."""
    reply = parse_reply([], [{"tool_calls": [{"tool_name": "get_user_details", "arguments": {"user_id": "sara_doe_496"}}]}])
    assert reply == ParsedReply(text=None, tool_calls=[LOOKUP_CALL])


def test_numeric_call_id_from_a_data_part_is_not_a_float_string() -> None:
    """Data parts turn an id 7 into 7.0; the call id must still read "7"."""
    reply = parse_reply([], [{"tool_calls": [{**LOOKUP, "id": 7.0}]}])
    assert reply.tool_calls[0].id == "7"


def test_data_part_single_tool_call_key() -> None:
    reply = parse_reply([], [{"tool_call": LOOKUP}])
    assert reply == ParsedReply(text=None, tool_calls=[LOOKUP_CALL])


def test_data_without_tool_calls_is_ignored_and_text_kept() -> None:
    """Agents attach other data (citations, state); only tool_calls mean actions."""
    reply = parse_reply(["Your reservation is confirmed."], [{"confidence": 0.9}, ["a", "b"], "note"])
    assert reply == ParsedReply(text="Your reservation is confirmed.", tool_calls=[])


def test_several_calls_in_one_data_part_keep_their_order() -> None:
    calls = [
        {"name": "get_reservation_details", "arguments": {"reservation_id": "ZFA04Y"}, "id": "a"},
        {"name": "get_user_details", "arguments": {"user_id": "sara_doe_496"}, "id": "b"},
    ]
    reply = parse_reply([], [{"tool_calls": calls}])
    assert reply.text is None
    assert reply.tool_calls == [
        ToolCallRequest(name="get_reservation_details", arguments={"reservation_id": "ZFA04Y"}, id="a"),
        ToolCallRequest(name="get_user_details", arguments={"user_id": "sara_doe_496"}, id="b"),
    ]


def test_calls_from_data_and_text_parts_are_all_collected() -> None:
    """Data-part calls first, then calls found in text, in part order."""
    text_call = json.dumps({"name": "list_all_airports", "arguments": {}})
    reply = parse_reply([text_call], [{"tool_calls": [LOOKUP]}])
    assert reply == ParsedReply(
        text=None,
        tool_calls=[LOOKUP_CALL, ToolCallRequest(name="list_all_airports", arguments={})],
    )


# -- JSON in text -------------------------------------------------------------------

PAYLOADS = {
    "name-arguments": LOOKUP,
    "tool_call": {"tool_call": LOOKUP},
    "tool_calls": {"tool_calls": [LOOKUP]},
}
WRAPPERS = {
    "bare": "{}",
    "bare-with-whitespace": "\n  {}  \n",
    "json-fence": "```json\n{}\n```",
    "plain-fence": "```\n{}\n```",
    "fence-with-prose": "Let me look that up.\n```json\n{}\n```",
    "json-tags": "<json>{}</json>",
    "json-tags-with-prose": "Checking your profile now. <json>\n{}\n</json>",
}


@pytest.mark.parametrize("payload", PAYLOADS, ids=list(PAYLOADS))
@pytest.mark.parametrize("wrapper", WRAPPERS, ids=list(WRAPPERS))
def test_tool_call_json_in_text(payload: str, wrapper: str) -> None:
    """Text-only agents: each payload shape, bare, fenced or tagged, is one call and no text."""
    text = WRAPPERS[wrapper].replace("{}", json.dumps(PAYLOADS[payload]), 1)
    assert parse_reply([text], []) == ParsedReply(text=None, tool_calls=[LOOKUP_CALL])


def test_several_calls_as_json_text() -> None:
    text = json.dumps({"tool_calls": [LOOKUP, {"name": "list_all_airports", "arguments": {}}]})
    reply = parse_reply([f"```json\n{text}\n```"], [])
    assert reply.tool_calls == [LOOKUP_CALL, ToolCallRequest(name="list_all_airports", arguments={})]


# -- respond ------------------------------------------------------------------------


def test_respond_in_a_data_part_is_text_for_the_user() -> None:
    reply = parse_reply([], [{"tool_calls": [{"name": "respond", "arguments": {"content": "How can I help?"}}]}])
    assert reply == ParsedReply(text="How can I help?", tool_calls=[])


def test_respond_as_json_text_is_text_for_the_user() -> None:
    text = json.dumps({"name": "respond", "arguments": {"content": "Your flight is on time."}})
    assert parse_reply([text], []) == ParsedReply(text="Your flight is on time.", tool_calls=[])


def test_respond_next_to_an_action_gives_text_and_the_action() -> None:
    calls = [LOOKUP, {"name": "respond", "arguments": {"content": "One moment."}}]
    reply = parse_reply([], [{"tool_calls": calls}])
    assert reply == ParsedReply(text="One moment.", tool_calls=[LOOKUP_CALL])


# -- plain text ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "I can help you change your flight.",
        "{not json at all}",
        '{"status": "ok", "count": 2}',
        "Here is an example:\n```json\n{\"reservation_id\": \"ZFA04Y\"}\n```",
        "Use the format <json>{\"name\": \"x\"}</json> next time.",
    ],
    ids=["prose", "braces", "json-not-a-call", "fence-not-a-call", "tags-without-arguments"],
)
def test_plain_text_stays_text(text: str) -> None:
    """Text that is not a tool call reaches the user unchanged."""
    assert parse_reply([text], []) == ParsedReply(text=text, tool_calls=[])


def test_several_text_parts_are_joined_and_blank_ones_dropped() -> None:
    assert parse_reply(["Hello.", "  ", "How can I help?"], []) == ParsedReply(
        text="Hello.\nHow can I help?", tool_calls=[]
    )


def test_blank_reply_has_neither_text_nor_calls() -> None:
    assert parse_reply(["", " \n"], []) == ParsedReply(text=None, tool_calls=[])


# -- arguments as a JSON string -----------------------------------------------------


def test_arguments_as_a_json_string() -> None:
    """OpenAI-style function calls carry their arguments as a JSON string."""
    call = {"name": "get_user_details", "arguments": json.dumps({"user_id": "sara_doe_496"})}
    assert parse_reply([], [{"tool_calls": [call]}]).tool_calls == [LOOKUP_CALL]
    assert parse_reply([json.dumps({"tool_call": call})], []).tool_calls == [LOOKUP_CALL]


@pytest.mark.parametrize("arguments", ["", "   "])
def test_empty_argument_string_means_no_arguments(arguments: str) -> None:
    reply = parse_reply([], [{"tool_calls": [{"name": "list_all_airports", "arguments": arguments}]}])
    assert reply.tool_calls == [ToolCallRequest(name="list_all_airports", arguments={})]


def test_missing_arguments_mean_no_arguments() -> None:
    reply = parse_reply([], [{"tool_calls": [{"name": "list_all_airports"}]}])
    assert reply.tool_calls == [ToolCallRequest(name="list_all_airports", arguments={})]


# -- malformed replies --------------------------------------------------------------


@pytest.mark.parametrize(
    ("texts", "datas", "message"),
    [
        ([], [{"tool_calls": {"name": "get_user_details"}}],
         'expected "tool_calls" to be a list of calls, got object {"name": "get_user_details"}'),
        ([], [{"tool_calls": "get_user_details"}],
         'expected "tool_calls" to be a list of calls, got string "get_user_details"'),
        (['```json\n{"tool_calls": null}\n```'], [],
         'expected "tool_calls" to be a list of calls, got null'),
        ([], [{"tool_calls": [{"arguments": {"user_id": "sara_doe_496"}}]}],
         'expected a tool call with a "name" (or "tool_name") string, got {"arguments": {"user_id": "sara_doe_496"}}'),
        ([], [{"tool_calls": [{"name": "", "arguments": {}}]}],
         'expected a tool call with a "name" (or "tool_name") string, got {"name": "", "arguments": {}}'),
        ([], [{"tool_calls": [{"name": 3.0, "arguments": {}}]}],
         'expected a tool call with a "name" (or "tool_name") string, got {"name": 3.0, "arguments": {}}'),
        ([], [{"tool_calls": ["get_user_details"]}],
         'expected a tool call object, got string "get_user_details"'),
        ([json.dumps({"tool_call": ["get_user_details"]})], [],
         'expected a tool call object, got array ["get_user_details"]'),
        ([], [{"tool_calls": [{"name": "get_user_details", "arguments": [1, 2]}]}],
         "tool call 'get_user_details': expected arguments to be an object, got array [1, 2]"),
        ([], [{"tool_calls": [{"name": "respond", "arguments": {}}]}],
         "expected respond(content: string), got respond arguments {}"),
        ([], [{"tool_calls": [{"name": "respond", "arguments": {"text": "Hello"}}]}],
         'expected respond(content: string), got respond arguments {"text": "Hello"}'),
        ([], [{"tool_calls": [{"name": "respond", "arguments": {"content": 5.0}}]}],
         'expected respond(content: string), got respond arguments {"content": 5.0}'),
    ],
    ids=[
        "tool_calls-object", "tool_calls-string", "tool_calls-null-in-text", "call-without-name",
        "call-with-empty-name", "call-with-numeric-name", "call-not-object", "tool_call-array-in-text",
        "arguments-array", "respond-without-content", "respond-with-other-key", "respond-numeric-content",
    ],
)
def test_malformed_reply_says_what_was_expected_and_what_came(
    texts: list[str], datas: list[Any], message: str
) -> None:
    with pytest.raises(MalformedReply) as caught:
        parse_reply(texts, datas)
    assert str(caught.value) == message


def test_arguments_string_that_is_not_json() -> None:
    with pytest.raises(MalformedReply) as caught:
        parse_reply([], [{"tool_calls": [{"name": "get_user_details", "arguments": "{user_id: sara}"}]}])
    assert str(caught.value).startswith("tool call 'get_user_details': arguments are not valid JSON (")


def test_long_offending_value_is_cut_in_the_message() -> None:
    """An agent may send a huge blob; the error names it without flooding the log."""
    with pytest.raises(MalformedReply) as caught:
        parse_reply([], [{"tool_calls": "x" * 5000}])
    assert str(caught.value) == 'expected "tool_calls" to be a list of calls, got string "' + "x" * 199 + "..."


# -- type restoration against tau2's schemas ----------------------------------------


def test_integer_argument_comes_back_as_int() -> None:
    """airline send_certificate.amount is an integer: 100.0 from a data part must be 100."""
    restored = restore_arguments({"user_id": "sara_doe_496", "amount": 100.0}, parameters("airline", "send_certificate"))
    assert typed(restored) == typed({"user_id": "sara_doe_496", "amount": 100})


def test_non_integral_value_of_an_integer_field_is_left_for_tau2_to_reject() -> None:
    restored = restore_arguments({"user_id": "u", "amount": 100.5}, parameters("airline", "send_certificate"))
    assert typed(restored) == typed({"user_id": "u", "amount": 100.5})


def test_book_reservation_nested_refs() -> None:
    """$defs/$ref models inside arrays: payment amounts and baggage counts become ints."""
    golden = {
        "user_id": "mia_li_3668",
        "origin": "JFK",
        "destination": "SEA",
        "flight_type": "one_way",
        "cabin": "economy",
        "flights": [{"flight_number": "HAT136", "date": "2024-05-20"}],
        "passengers": [{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}],
        "payment_methods": [
            {"payment_id": "certificate_7504069", "amount": 250},
            {"payment_id": "credit_card_4421486", "amount": 5},
        ],
        "total_baggages": 3,
        "nonfree_baggages": 0,
        "insurance": "no",
    }
    restored = restore_arguments(as_wire(golden), parameters("airline", "book_reservation"))
    assert typed(restored) == typed(golden)


def test_number_argument_stays_float() -> None:
    """telecom refuel_data.gb_amount is a number: the golden actions hold 2.0, so 2.0 it stays."""
    arguments = {"customer_id": "C1001", "line_id": "L1002", "gb_amount": 2.0}
    restored = restore_arguments(arguments, parameters("telecom", "refuel_data"))
    assert typed(restored) == typed({"customer_id": "C1001", "line_id": "L1002", "gb_amount": 2.0})


def test_booleans_strings_and_nulls_are_untouched() -> None:
    schema = {
        "type": "object",
        "properties": {
            "flag": {"type": "boolean"},
            "count": {"type": "integer"},
            "label": {"type": "string"},
            "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
    }
    arguments = {"flag": True, "count": 1.0, "label": "2", "maybe": None, "extra": False}
    assert typed(restore_arguments(arguments, schema)) == typed(
        {"flag": True, "count": 1, "label": "2", "maybe": None, "extra": False}
    )


def test_optional_integer_and_optional_number() -> None:
    schema = {
        "type": "object",
        "properties": {
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "ratio": {"anyOf": [{"type": "number"}, {"type": "null"}]},
            "levels": {"type": "array", "items": {"type": "integer"}},
        },
    }
    restored = restore_arguments({"limit": 12.0, "ratio": 1.0, "levels": [1.0, 2.0]}, schema)
    assert typed(restored) == typed({"limit": 12, "ratio": 1.0, "levels": [1, 2]})


def test_union_of_a_model_and_a_free_object_follows_the_model() -> None:
    """pydantic's `list[Model | dict]` (as in book_reservation): the model's number field keeps its float."""
    schema = {
        "$defs": {
            "Leg": {
                "type": "object",
                "properties": {"distance": {"type": "number"}, "stops": {"type": "integer"}},
            }
        },
        "type": "object",
        "properties": {
            "legs": {
                "type": "array",
                "items": {"anyOf": [{"$ref": "#/$defs/Leg"}, {"type": "object", "additionalProperties": True}]},
            }
        },
    }
    restored = restore_arguments({"legs": [{"distance": 300.0, "stops": 1.0}]}, schema)
    assert typed(restored) == typed({"legs": [{"distance": 300.0, "stops": 1}]})


def test_every_golden_action_survives_the_data_part_round_trip() -> None:
    """For all airline and telecom golden actions: doubles restored give back the exact arguments."""
    from tau2.run import load_tasks

    seen: set[tuple[str, str, str]] = set()
    for domain in ("airline", "telecom"):
        tools = {s["function"]["name"]: s["function"]["parameters"] for s in schemas(domain)}
        for task in load_tasks(domain):
            for action in (task.evaluation_criteria.actions or []) if task.evaluation_criteria else []:
                key = (domain, action.name, repr(typed(action.arguments)))
                if action.requestor != "assistant" or key in seen:
                    continue
                seen.add(key)
                restored = restore_arguments(as_wire(action.arguments), tools[action.name])
                assert typed(restored) == typed(action.arguments), (domain, task.id, action.name)
    names = {name for _, name, _ in seen}
    assert {"book_reservation", "send_certificate", "update_reservation_baggages", "refuel_data"} <= names


# -- tool descriptions --------------------------------------------------------------


@pytest.mark.parametrize("domain", ["airline", "retail", "telecom"])
def test_describe_tools_lists_every_tool(domain: str) -> None:
    tools = schemas(domain)
    lines = describe_tools(tools).splitlines()
    assert [line.split("(", 1)[0] for line in lines] == [f"- {t['function']['name']}" for t in tools]


def test_describe_tools_marks_optional_arguments_and_types() -> None:
    lines = describe_tools(schemas("airline")).splitlines()
    assert "- send_certificate(user_id: string, amount: integer): Send a certificate to a user. Be careful!" in lines
    book = next(line for line in lines if line.startswith("- book_reservation("))
    assert "flights: array" in book and "total_baggages: integer" in book
    telecom = describe_tools(schemas("telecom")).splitlines()
    assert any(line.startswith("- get_bills_for_customer(customer_id: string, limit?: integer)") for line in telecom)
