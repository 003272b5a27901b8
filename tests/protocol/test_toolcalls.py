"""The tool-call convention: every form an agent may answer in, and the types tau2 gets back.

A reply the parser misreads becomes a wrong action in tau2's trajectory, and an
argument of the wrong numeric type changes the database hash the reward is
computed from, so each form and each type rule is pinned down exactly.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from typing import Any

import pytest
from tau2.registry import registry

import tau2_a2a.tau2bench.seam.imports  # noqa: F401  (tau2 imported as tau2-a2a imports it: quietly)
from tau2_a2a.protocol.toolcalls import (
    ANSWER_CONVENTION,
    DataPart,
    MalformedReply,
    ParsedReply,
    ToolCallRequest,
    call_arguments,
    describe_tools,
    parse_reply,
    restore_arguments,
)
from tests.support.values import as_wire, typed

LOOKUP = {"name": "get_user_details", "arguments": {"user_id": "sara_doe_496"}}
LOOKUP_CALL = ToolCallRequest(name="get_user_details", arguments={"user_id": "sara_doe_496"})
ADK_CALL = {"adk_type": "function_call"}  # the metadata google-adk gives a function call's data part


def data_parts(*values: Any, metadata: dict[str, Any] | None = None) -> list[DataPart]:
    """Data parts of a reply, all with the same metadata (none, as most agents send them)."""
    return [DataPart(value, dict(metadata or {})) for value in values]


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


# -- data parts ---------------------------------------------------------------------


def test_data_part_tool_calls_with_name_arguments_and_id() -> None:
    """The canonical form: ids are kept so tau2 can pair results with calls."""
    reply = parse_reply([], data_parts({"tool_calls": [{**LOOKUP, "id": "call_7"}]}))
    assert reply == ParsedReply(
        text=None,
        tool_calls=[ToolCallRequest(name="get_user_details", arguments={"user_id": "sara_doe_496"}, id="call_7")],
    )


def test_data_part_tool_name_spelling_and_missing_id() -> None:
    """Some frameworks say tool_name; a call without id gets none (tau2 assigns one)."""
    reply = parse_reply([], data_parts({"tool_calls": [{"tool_name": "get_user_details", "arguments": {"user_id": "sara_doe_496"}}]}))
    assert reply == ParsedReply(text=None, tool_calls=[LOOKUP_CALL])


def test_numeric_call_id_from_a_data_part_is_not_a_float_string() -> None:
    """Data parts turn an id 7 into 7.0; the call id must still read "7"."""
    reply = parse_reply([], data_parts({"tool_calls": [{**LOOKUP, "id": 7.0}]}))
    assert reply.tool_calls[0].id == "7"


def test_data_part_single_tool_call_key() -> None:
    reply = parse_reply([], data_parts({"tool_call": LOOKUP}))
    assert reply == ParsedReply(text=None, tool_calls=[LOOKUP_CALL])


def test_data_without_tool_calls_is_ignored_and_text_kept() -> None:
    """Agents attach other data (citations, state); only tool_calls mean actions."""
    reply = parse_reply(["Your reservation is confirmed."], data_parts({"confidence": 0.9}, ["a", "b"], "note"))
    assert reply == ParsedReply(text="Your reservation is confirmed.", tool_calls=[])


def test_several_calls_in_one_data_part_keep_their_order() -> None:
    calls = [
        {"name": "get_reservation_details", "arguments": {"reservation_id": "ZFA04Y"}, "id": "a"},
        {"name": "get_user_details", "arguments": {"user_id": "sara_doe_496"}, "id": "b"},
    ]
    reply = parse_reply([], data_parts({"tool_calls": calls}))
    assert reply.text is None
    assert reply.tool_calls == [
        ToolCallRequest(name="get_reservation_details", arguments={"reservation_id": "ZFA04Y"}, id="a"),
        ToolCallRequest(name="get_user_details", arguments={"user_id": "sara_doe_496"}, id="b"),
    ]


def test_calls_from_data_and_text_parts_are_all_collected() -> None:
    """Data-part calls first, then calls found in text, in part order."""
    text_call = json.dumps({"name": "list_all_airports", "arguments": {}})
    reply = parse_reply([text_call], data_parts({"tool_calls": [LOOKUP]}))
    assert reply == ParsedReply(
        text=None,
        tool_calls=[LOOKUP_CALL, ToolCallRequest(name="list_all_airports", arguments={})],
    )


# -- every form, as JSON text and in a data part -------------------------------------

OPENAI_LOOKUP = {
    "id": "call_abc",
    "type": "function",
    "function": {"name": "get_user_details", "arguments": json.dumps({"user_id": "sara_doe_496"})},
}
OPENAI_LOOKUP_CALL = replace(LOOKUP_CALL, id="call_abc", form="openai")
PAYLOADS: dict[str, tuple[dict[str, Any], ToolCallRequest]] = {
    "name-arguments": (LOOKUP, LOOKUP_CALL),
    "tool_call": ({"tool_call": LOOKUP}, LOOKUP_CALL),
    "tool_calls": ({"tool_calls": [LOOKUP]}, LOOKUP_CALL),
    "openai": ({"tool_calls": [OPENAI_LOOKUP]}, OPENAI_LOOKUP_CALL),
    "openai-arguments-object": (
        {"tool_calls": [{**OPENAI_LOOKUP, "function": {"name": "get_user_details", "arguments": {"user_id": "sara_doe_496"}}}]},
        OPENAI_LOOKUP_CALL,
    ),
    "openai-assistant-message": ({"role": "assistant", "content": None, "tool_calls": [OPENAI_LOOKUP]}, OPENAI_LOOKUP_CALL),
    "openai-legacy": (
        {"function_call": {"name": "get_user_details", "arguments": json.dumps({"user_id": "sara_doe_496"})}},
        replace(LOOKUP_CALL, form="openai_legacy"),
    ),
    "openai-legacy-arguments-object": (
        {"function_call": {"name": "get_user_details", "arguments": {"user_id": "sara_doe_496"}}},
        replace(LOOKUP_CALL, form="openai_legacy"),
    ),
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
    """Text-only agents: each payload shape, bare, fenced or tagged, is one call (in its form) and no text."""
    value, expected = PAYLOADS[payload]
    text = WRAPPERS[wrapper].replace("{}", json.dumps(value), 1)
    assert parse_reply([text], []) == ParsedReply(text=None, tool_calls=[expected])


@pytest.mark.parametrize("payload", [name for name in PAYLOADS if name != "name-arguments"])
def test_tool_call_forms_in_a_data_part(payload: str) -> None:
    value, expected = PAYLOADS[payload]
    assert parse_reply([], data_parts(value)) == ParsedReply(text=None, tool_calls=[expected])


def test_a_bare_call_object_in_a_data_part_is_not_a_call() -> None:
    """In data, only the keyed forms are calls: other data an agent attaches may well have a name."""
    assert parse_reply(["Done."], data_parts(LOOKUP)) == ParsedReply(text="Done.", tool_calls=[])


def test_forms_may_be_mixed_in_one_list() -> None:
    reply = parse_reply([], data_parts({"tool_calls": [OPENAI_LOOKUP, {**LOOKUP, "id": "c2"}]}))
    assert reply.tool_calls == [OPENAI_LOOKUP_CALL, replace(LOOKUP_CALL, id="c2")]


def test_several_json_tags_are_several_calls_in_order() -> None:
    """What the tools text teaches: one <json> block per call, prose around them dropped."""
    second = {"name": "list_all_airports", "arguments": {}}
    text = f"First your profile: <json>{json.dumps(LOOKUP)}</json> then the airports:\n<json>{json.dumps(second)}</json>"
    assert parse_reply([text], []) == ParsedReply(
        text=None, tool_calls=[LOOKUP_CALL, ToolCallRequest(name="list_all_airports", arguments={})]
    )


def test_blocks_of_tags_and_fences_come_in_text_order() -> None:
    second = {"function_call": {"name": "list_all_airports", "arguments": "{}"}}
    text = f"```json\n{json.dumps(second)}\n```\n<json>{json.dumps(LOOKUP)}</json>"
    reply = parse_reply([text], [])
    assert [(c.name, c.form) for c in reply.tool_calls] == [("list_all_airports", "openai_legacy"), ("get_user_details", "tau2")]


def test_an_example_block_beside_a_call_block_is_not_a_call() -> None:
    text = f'An example reservation: <json>{{"reservation_id": "ZFA04Y"}}</json> <json>{json.dumps(LOOKUP)}</json>'
    assert parse_reply([text], []) == ParsedReply(text=None, tool_calls=[LOOKUP_CALL])


# -- ADK function-call data parts ---------------------------------------------------


def test_adk_function_call_data_part() -> None:
    """google-adk puts a function call on the wire as {"name", "args", "id"} marked adk_type=function_call."""
    data = {"name": "get_user_details", "args": {"user_id": "sara_doe_496"}, "id": "adk-1b2c"}
    reply = parse_reply([], data_parts(data, metadata=ADK_CALL))
    assert reply == ParsedReply(text=None, tool_calls=[replace(LOOKUP_CALL, id="adk-1b2c", form="adk")])


def test_adk_function_call_without_args_or_id() -> None:
    """ADK leaves out args and id that are None."""
    reply = parse_reply([], data_parts({"name": "list_all_airports"}, metadata=ADK_CALL))
    assert reply.tool_calls == [ToolCallRequest(name="list_all_airports", arguments={}, form="adk")]


def test_adk_respond_and_several_calls_with_thoughts_and_other_metadata() -> None:
    """ADK adds metadata of its own (thought signatures, long-running ids); only adk_type decides."""
    metadata = {**ADK_CALL, "adk_thought_signature": "c2ln", "adk_is_long_running": True}
    reply = parse_reply(
        ["Let me check."],
        data_parts(
            {"name": "get_user_details", "args": {"user_id": "sara_doe_496"}, "id": "a"},
            {"name": "respond", "args": {"content": "One moment."}, "id": "b"},
            metadata=metadata,
        ),
    )
    assert reply == ParsedReply(text="Let me check.\nOne moment.", tool_calls=[replace(LOOKUP_CALL, id="a", form="adk")])


def test_adk_function_call_metadata_decides_not_the_shape() -> None:
    """The same data marked as an ADK function response, or not marked at all, asks for nothing."""
    data = {"name": "get_user_details", "args": {"user_id": "sara_doe_496"}, "id": "a"}
    for metadata in ({"adk_type": "function_response"}, {}, {"adk_type": "Function_Call"}):
        assert parse_reply(["Hello."], data_parts(data, metadata=metadata)).tool_calls == []


def test_several_calls_as_json_text() -> None:
    text = json.dumps({"tool_calls": [LOOKUP, {"name": "list_all_airports", "arguments": {}}]})
    reply = parse_reply([f"```json\n{text}\n```"], [])
    assert reply.tool_calls == [LOOKUP_CALL, ToolCallRequest(name="list_all_airports", arguments={})]


# -- respond ------------------------------------------------------------------------


def test_respond_in_a_data_part_is_text_for_the_user() -> None:
    reply = parse_reply([], data_parts({"tool_calls": [{"name": "respond", "arguments": {"content": "How can I help?"}}]}))
    assert reply == ParsedReply(text="How can I help?", tool_calls=[])


def test_respond_as_json_text_is_text_for_the_user() -> None:
    text = json.dumps({"name": "respond", "arguments": {"content": "Your flight is on time."}})
    assert parse_reply([text], []) == ParsedReply(text="Your flight is on time.", tool_calls=[])


def test_respond_next_to_an_action_gives_text_and_the_action() -> None:
    calls = [LOOKUP, {"name": "respond", "arguments": {"content": "One moment."}}]
    reply = parse_reply([], data_parts({"tool_calls": calls}))
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
    assert parse_reply([], data_parts({"tool_calls": [call]})).tool_calls == [LOOKUP_CALL]
    assert parse_reply([json.dumps({"tool_call": call})], []).tool_calls == [LOOKUP_CALL]


@pytest.mark.parametrize("arguments", ["", "   "])
def test_empty_argument_string_means_no_arguments(arguments: str) -> None:
    reply = parse_reply([], data_parts({"tool_calls": [{"name": "list_all_airports", "arguments": arguments}]}))
    assert reply.tool_calls == [ToolCallRequest(name="list_all_airports", arguments={})]


def test_missing_arguments_mean_no_arguments() -> None:
    reply = parse_reply([], data_parts({"tool_calls": [{"name": "list_all_airports"}]}))
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
        ([], [{"tool_calls": [{"type": "function", "function": "get_user_details"}]}],
         'expected an OpenAI tool call {"type": "function", "function": {"name": ..., "arguments": ...}}, '
         'got {"type": "function", "function": "get_user_details"}'),
        (['<json>{"tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}</json>'], [],
         'expected an OpenAI tool call {"type": "function", "function": {"name": ..., "arguments": ...}}, '
         'got {"id": "c", "function": {"arguments": "{}"}}'),
        ([], [{"tool_calls": [{"function": {"name": "get_user_details", "arguments": 5.0}}]}],
         "tool call 'get_user_details': expected arguments to be an object, got number 5.0"),
        (['{"function_call": "get_user_details"}'], [],
         'expected "function_call" to be {"name": ..., "arguments": ...}, got string "get_user_details"'),
        ([], [{"function_call": {"arguments": {}}}],
         'expected "function_call" to be {"name": ..., "arguments": ...}, got object {"arguments": {}}'),
        (["```json\n{\"function_call\": {\"name\": \"x\", \"arguments\": \"[1]\"}}\n```"], [],
         "tool call 'x': expected arguments to be an object, got array [1]"),
    ],
    ids=[
        "tool_calls-object", "tool_calls-string", "tool_calls-null-in-text", "call-without-name",
        "call-with-empty-name", "call-with-numeric-name", "call-not-object", "tool_call-array-in-text",
        "arguments-array", "respond-without-content", "respond-with-other-key", "respond-numeric-content",
        "openai-function-string", "openai-function-without-name-in-text", "openai-arguments-number",
        "function_call-string-in-text", "function_call-without-name", "function_call-arguments-array-in-text",
    ],
)
def test_malformed_reply_says_what_was_expected_and_what_came(
    texts: list[str], datas: list[Any], message: str
) -> None:
    with pytest.raises(MalformedReply) as caught:
        parse_reply(texts, data_parts(*datas))
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (["get_user_details"], 'expected an ADK function call {"name": ..., "args": {...}, "id": ...}, '
                               'got array ["get_user_details"]'),
        ({"args": {"user_id": "u"}, "id": "a"}, 'expected an ADK function call {"name": ..., "args": {...}, '
                                                '"id": ...}, got object {"args": {"user_id": "u"}, "id": "a"}'),
        ({"name": "get_user_details", "args": ["u"]},
         "tool call 'get_user_details': expected arguments to be an object, got array [\"u\"]"),
        ({"name": "respond", "args": {"content": ["hi"]}},
         'expected respond(content: string), got respond arguments {"content": ["hi"]}'),
    ],
    ids=["not-an-object", "without-name", "args-array", "respond-content-array"],
)
def test_malformed_adk_function_call(data: Any, message: str) -> None:
    with pytest.raises(MalformedReply) as caught:
        parse_reply([], data_parts(data, metadata=ADK_CALL))
    assert str(caught.value) == message


@pytest.mark.parametrize("depth", [50, 990, 1000, 3000, 100_000])
def test_deeply_nested_json_is_text_or_a_malformed_reply(depth: int) -> None:
    """Whatever depth, the parser answers with text or MalformedReply, never a RecursionError."""
    nested = "[" * depth + "]" * depth
    for text in (nested, f'{{"tool_calls": {nested}}}', f'<json>{{"tool_calls": [{nested}]}}</json>',
                 f'{{"name": "x", "arguments": {nested}}}'):
        try:
            reply = parse_reply([text], [])
        except MalformedReply:
            continue
        assert reply.text == text and reply.tool_calls == []
    with pytest.raises(MalformedReply, match="tool call 'x': expected arguments to be an object or its JSON text"):
        parse_reply([], data_parts({"tool_calls": [{"name": "x", "arguments": "[" * 100_000}]}))


def test_a_number_too_long_for_python_is_not_json() -> None:
    text = '{"name": "x", "arguments": {"n": ' + "1" * 5000 + "}}"
    assert parse_reply([text], []) == ParsedReply(text=text, tool_calls=[])


def test_arguments_string_that_is_not_json() -> None:
    with pytest.raises(MalformedReply) as caught:
        parse_reply([], data_parts({"tool_calls": [{"name": "get_user_details", "arguments": "{user_id: sara}"}]}))
    assert str(caught.value) == (
        "tool call 'get_user_details': expected arguments to be an object or its JSON text, got a string that "
        'is not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1)): "{user_id: sara}"'
    )


def test_long_offending_value_is_cut_in_the_message() -> None:
    """An agent may send a huge blob; the error names it without flooding the log."""
    with pytest.raises(MalformedReply) as caught:
        parse_reply([], data_parts({"tool_calls": "x" * 5000}))
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


BAGGAGE = {"reservation_id": "YAX4DR", "total_baggages": 2.0, "nonfree_baggages": 0, "payment_id": "credit_card_4938634"}


@pytest.mark.parametrize("reply", [
    ([], data_parts({"tool_calls": [{"name": "update_reservation_baggages", "arguments": json.dumps(BAGGAGE)}]})),
    ([], data_parts({"tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "update_reservation_baggages", "arguments": json.dumps(BAGGAGE)}}]})),
    ([], data_parts({"function_call": {"name": "update_reservation_baggages", "arguments": json.dumps(BAGGAGE)}})),
    ([f'<json>{{"name": "update_reservation_baggages", "arguments": {json.dumps(BAGGAGE)}}}</json>'], []),
], ids=["tau2-string", "openai", "openai-legacy", "text"])
def test_arguments_sent_as_json_text_keep_their_numbers_as_written(reply: Any) -> None:
    """tau2's llm_agent parses its model's JSON text as it is: 2.0 for an integer stays 2.0 (and tau2 stores it so,
    which changes the database hash), 0 stays 0. Over A2A the same text must give the same arguments."""
    [call] = parse_reply(*reply).tool_calls
    assert call.exact_numbers
    arguments = call_arguments(call, parameters("airline", "update_reservation_baggages"))
    assert typed(arguments) == typed(BAGGAGE)


def test_arguments_sent_as_a_data_object_get_the_schemas_types() -> None:
    """A data part's object carries only doubles: which were integers, only the schema can say."""
    [call] = parse_reply([], data_parts({"tool_calls": [{"name": "update_reservation_baggages",
                                                         "arguments": as_wire(BAGGAGE)}]})).tool_calls
    assert not call.exact_numbers
    arguments = call_arguments(call, parameters("airline", "update_reservation_baggages"))
    assert typed(arguments) == typed({**BAGGAGE, "total_baggages": 2, "nonfree_baggages": 0})


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
    from tau2_a2a.tau2bench.seam.distribution import load_tasks

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
    assert {"book_reservation", "update_reservation_baggages", "refuel_data"} <= names  # in every tau2's tasks


# -- tool descriptions --------------------------------------------------------------


@pytest.mark.parametrize("domain", ["airline", "retail", "telecom", "mock"])
def test_describe_tools_carries_the_full_schemas_as_json(domain: str) -> None:
    """A text-only agent sees every field, item type, enum and description tau2's native agent sees."""
    tools = schemas(domain)
    text = describe_tools(tools)
    convention, listed = text.split("\nThe tools, as OpenAI function schemas:\n")
    assert convention == ANSWER_CONVENTION
    assert json.loads(listed) == tools
    assert len(listed.splitlines()) == len(tools) + 2  # "[", one tool per line, "]"


def test_describe_tools_keeps_nested_definitions() -> None:
    """book_reservation's passengers and payments are $defs models: the text must not flatten them away."""
    listed = describe_tools(schemas("airline")).split("OpenAI function schemas:\n")[1]
    book = next(t for t in json.loads(listed) if t["function"]["name"] == "book_reservation")
    assert set(book["function"]["parameters"]["$defs"]) >= {"FlightInfo", "Passenger", "Payment"}
    assert book["function"]["parameters"]["properties"]["cabin"]["enum"] == ["business", "economy", "basic_economy"]


def test_answer_convention_teaches_the_forms_the_parser_reads() -> None:
    """Each example in the paragraph, filled in, parses as the paragraph says."""
    assert parse_reply(['<json>{"name": "get_user_details", "arguments": {"user_id": "sara_doe_496"}}</json>'], []) == (
        ParsedReply(text=None, tool_calls=[LOOKUP_CALL])
    )
    assert parse_reply(['<json>{"name": "respond", "arguments": {"content": "Hello."}}</json>'], []) == (
        ParsedReply(text="Hello.", tool_calls=[])
    )
    assert parse_reply([], data_parts({"tool_calls": [LOOKUP]})).tool_calls == [LOOKUP_CALL]
    for example in ('<json>{"name": TOOL_NAME, "arguments": {...}}</json>',
                    '<json>{"name": "respond", "arguments": {"content": YOUR_MESSAGE}}</json>',
                    '{"tool_calls": [{"name": TOOL_NAME, "arguments": {...}}]}'):
        assert example in ANSWER_CONVENTION
