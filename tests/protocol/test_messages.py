"""tau2 turns -> A2A parts -> tau2 turns: nothing an agent needs may be lost or mixed up.

The client encodes and the reference agents decode with the same module, so a
loss here would be invisible in an end-to-end run; each field is compared
exactly, with Python types (a data part turns every number into a double).
"""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from a2a.helpers import new_data_part, new_text_part
from a2a.types import Artifact, Message, Part, Role, Task, TaskState, TaskStatus
from google.genai import types as genai_types
from google.protobuf.json_format import MessageToDict, MessageToJson, Parse
from tau2.agent.llm_agent import LLMAgent
from tau2.registry import registry

import tau2_a2a.tau2bench.seam.imports  # noqa: F401  (tau2 imported as tau2-a2a imports it: quietly)
from tau2_a2a.protocol.messages import (
    KIND,
    IncomingTurn,
    ToolResult,
    conversation_start,
    part_size_text,
    read_turn,
    reply_content,
    reply_parts,
    restore_schema_numbers,
    tool_calls_reply,
    tool_results_turn,
    user_turn,
)
from tau2_a2a.protocol.toolcalls import (
    DataPart,
    ParsedReply,
    ToolCallRequest,
    call_arguments,
    parse_reply,
    restore_arguments,
)
from tau2_a2a.tau2bench.seam.distribution import load_tasks
from tests.support.executors import AsksForInput, agent_app
from tests.support.runs import Serve, run_a2a
from tests.support.values import typed

with warnings.catch_warnings():  # google-adk marks its A2A converters experimental on every call
    warnings.simplefilter("ignore")
    from google.adk.a2a.converters.part_converter import (
        convert_a2a_part_to_genai_part,
        convert_genai_part_to_a2a_part,
    )

pytestmark = pytest.mark.filterwarnings("ignore:.*EXPERIMENTAL.*:UserWarning")

GREETING = {"role": "assistant", "content": "Hi! How can I help you today?"}
USER_TEXT = "I need to cancel reservation ZFA04Y.\n[tau2-task domain=airline id=0]"


@cache
def _domain(domain: str) -> tuple[str, str]:
    env = registry.get_env_constructor(domain)()
    agent = LLMAgent(tools=env.get_tools(), domain_policy=env.get_policy(), llm="none")
    return agent.system_prompt, json.dumps([tool.openai_schema for tool in env.get_tools()])


def system_prompt(domain: str) -> str:
    """The system prompt tau2's own LLM agent would get: instructions plus <policy>."""
    return _domain(domain)[0]


def tool_schemas(domain: str) -> list[dict[str, Any]]:
    return json.loads(_domain(domain)[1])


def message(parts: list[Part]) -> Message:
    return Message(role=Role.ROLE_USER, parts=parts, message_id=str(uuid.uuid4()), context_id="ctx-1")


def direct(msg: Message) -> Message:
    return msg


def through_json(msg: Message) -> Message:
    """What the agent's server gets: the message as JSON on the wire, parsed back."""
    return Parse(MessageToJson(msg), Message())


WIRES: dict[str, Callable[[Message], Message]] = {"in-memory": direct, "json-wire": through_json}


def kinds(parts: list[Part]) -> list[str]:
    return [part.metadata[KIND] for part in parts]


# -- the first message ----------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES, ids=list(WIRES))
def test_first_message_round_trip(wire: str) -> None:
    """System prompt, tools, history and the user's words all come back as they were sent."""
    prompt = system_prompt("airline")
    tools = tool_schemas("airline")
    parts = conversation_start(prompt, tools, user_turn(USER_TEXT), [GREETING])
    turn = read_turn(WIRES[wire](message(parts)))
    assert turn.system == prompt
    assert typed(turn.tools) == typed(tools)
    assert turn.history == [GREETING]
    assert turn.user_text == USER_TEXT
    assert turn.tool_results == []


@pytest.mark.parametrize("domain", ["airline", "retail", "telecom", "mock"])
def test_tool_schemas_come_back_with_their_integers(domain: str) -> None:
    """telecom's get_bills_for_customer has `default: 12`; a data part makes it 12.0, the decoder 12 again."""
    tools = tool_schemas(domain)
    turn = read_turn(through_json(message(conversation_start("policy", tools, user_turn("hi"), []))))
    assert json.dumps(turn.tools, sort_keys=True) == json.dumps(tools, sort_keys=True)


def test_schema_numbers_keep_the_floats_of_number_typed_values() -> None:
    """Bounds and integer defaults become ints again; a number's default/enum stay floats."""
    sent = {
        "type": "object",
        "properties": {
            "limit": {"type": "integer", "default": 12.0, "minimum": 1.0, "maximum": 100.0},
            "gb_amount": {"type": "number", "default": 2.0, "enum": [1.0, 2.5], "minimum": 0.5},
            "ratio": {"type": ["number", "null"], "default": 1.0},
            "type": {"type": "string", "maxLength": 8.0},
        },
        "required": ["limit"],
    }
    assert typed(restore_schema_numbers(sent)) == typed(
        {
            "type": "object",
            "properties": {
                "limit": {"type": "integer", "default": 12, "minimum": 1, "maximum": 100},
                "gb_amount": {"type": "number", "default": 2.0, "enum": [1.0, 2.5], "minimum": 0.5},
                "ratio": {"type": ["number", "null"], "default": 1.0},
                "type": {"type": "string", "maxLength": 8},
            },
            "required": ["limit"],
        }
    )


def test_system_prompt_travels_only_in_the_system_part() -> None:
    """Instructions and policy must never be mixed into what the user said."""
    prompt = system_prompt("airline")
    parts = through_json(message(conversation_start(prompt, tool_schemas("airline"), user_turn(USER_TEXT), [GREETING]))).parts
    assert kinds(list(parts)) == ["system", "tools", "tools", "history", "user"]
    system_parts = [p for p in parts if p.metadata[KIND] == "system"]
    assert [p.text for p in system_parts] == [prompt]
    assert "<policy>" in prompt
    user_parts = [p for p in parts if p.metadata[KIND] == "user"]
    assert [p.text for p in user_parts] == [USER_TEXT]
    turn = read_turn(message(list(parts)))
    assert "<policy>" not in turn.user_text


@pytest.mark.parametrize("domain", ["airline", "retail", "telecom"])
def test_tools_text_part_carries_the_full_schemas_for_text_only_agents(domain: str) -> None:
    """The text holds exactly what the data part holds: a text-only agent misses nothing."""
    tools = tool_schemas(domain)
    parts = through_json(message(conversation_start("policy", tools, user_turn("hi"), []))).parts
    text = parts[1].text
    assert text.startswith("<tools>\nTo call a tool, answer with <json>") and text.endswith("\n]\n</tools>")
    listed = text.removesuffix("\n</tools>").split("The tools, as OpenAI function schemas:\n")[1]
    assert json.loads(listed) == tools
    assert typed(json.loads(listed)) == typed(read_turn(message(list(parts))).tools)


def test_history_with_tool_calls_keeps_argument_types() -> None:
    """A task's prior history may hold tool calls: integer arguments must not come back as floats."""
    history = [
        {"role": "user", "content": "Please send me a certificate."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "name": "send_certificate", "arguments": {"user_id": "sara_doe_496", "amount": 100}},
            {"id": "call_2", "name": "update_reservation_baggages", "arguments": {
                "reservation_id": "ZFA04Y", "total_baggages": 2, "nonfree_baggages": 0, "payment_id": "gift_card_1"}},
        ]},
        {"role": "tool", "content": "Certificate sent", "id": "call_1", "error": False},
        {"role": "tool", "content": "Error: reservation not found", "id": "call_2", "error": True},
    ]
    turn = read_turn(through_json(message(conversation_start("policy", tool_schemas("airline"), user_turn("ok"), history))))
    assert typed(turn.history) == typed(history)


def test_history_keeps_the_floats_of_number_arguments() -> None:
    history = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "name": "refuel_data", "arguments": {"customer_id": "C1", "line_id": "L1", "gb_amount": 2.0}}]}]
    turn = read_turn(through_json(message(conversation_start("policy", tool_schemas("telecom"), user_turn("ok"), history))))
    assert typed(turn.history) == typed(history)


def test_real_task_history_round_trip() -> None:
    """The mock domain ships tasks that start mid-conversation, with tool calls and results."""
    from tau2_a2a.tau2bench.participants.a2a_agent import _history_entry
    from tau2_a2a.tau2bench.seam.distribution import load_tasks

    task = next(t for t in load_tasks("mock") if t.initial_state and t.initial_state.message_history)
    history = [_history_entry(m) for m in task.initial_state.message_history]
    assert any("tool_calls" in entry for entry in history)
    turn = read_turn(through_json(message(conversation_start("policy", tool_schemas("mock"), user_turn("hi"), history))))
    assert typed(turn.history) == typed(history)


# -- later messages -------------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES, ids=list(WIRES))
def test_user_turn_round_trip(wire: str) -> None:
    turn = read_turn(WIRES[wire](message(user_turn("Yes, please go ahead."))))
    assert turn == IncomingTurn(user_text="Yes, please go ahead.")


RESULTS = [
    ToolResult(id="call_1", name="get_user_details", content='{"user_id": "sara_doe_496", "membership": "gold"}'),
    ToolResult(id="call_2", name="get_reservation_details", content="Error: Reservation ZZZ999 not found", error=True),
    ToolResult(id="call_3", name="calculate", content="42.0"),
]


@pytest.mark.parametrize("wire", WIRES, ids=list(WIRES))
def test_several_tool_results_in_one_message(wire: str) -> None:
    """Ids, names, contents and error flags of all results of one turn, in order."""
    parts = tool_results_turn(RESULTS)
    assert kinds(parts) == ["tool_results", "tool_results"]
    turn = read_turn(WIRES[wire](message(parts)))
    assert turn == IncomingTurn(tool_results=RESULTS)
    assert [type(r.error) for r in turn.tool_results] == [bool, bool, bool]


def test_tool_results_text_for_text_only_agents() -> None:
    assert tool_results_turn(RESULTS[:2])[0].text == (
        'Tool result for get_user_details (call call_1):\n{"user_id": "sara_doe_496", "membership": "gold"}\n'
        "Tool result (error) for get_reservation_details (call call_2):\nError: Reservation ZZZ999 not found"
    )


def test_first_message_may_carry_tool_results() -> None:
    """When a task's history ends with a tool call, the first message answers it."""
    parts = conversation_start("policy", tool_schemas("airline"), tool_results_turn(RESULTS[:1]), [GREETING])
    turn = read_turn(through_json(message(parts)))
    assert turn.system == "policy"
    assert turn.user_text is None
    assert turn.tool_results == RESULTS[:1]


def test_parts_without_a_kind_are_the_users_words() -> None:
    """A plain A2A client sends bare text parts: they are what the user said."""
    turn = read_turn(message([new_text_part("Hello"), new_text_part("Anyone there?")]))
    assert turn == IncomingTurn(user_text="Hello\nAnyone there?")


# -- the agent's reply ----------------------------------------------------------------


CALLS = [
    ToolCallRequest(name="send_certificate", arguments={"user_id": "sara_doe_496", "amount": 100}, id="call_9"),
    ToolCallRequest(name="book_reservation", arguments={
        "user_id": "mia_li_3668", "origin": "JFK", "destination": "SEA", "flight_type": "one_way",
        "cabin": "economy", "flights": [{"flight_number": "HAT136", "date": "2024-05-20"}],
        "passengers": [{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}],
        "payment_methods": [{"payment_id": "certificate_7504069", "amount": 250}],
        "total_baggages": 3, "nonfree_baggages": 0, "insurance": "no"}),
    ToolCallRequest(name="get_user_details", arguments={"user_id": "sara_doe_496"}),
]


@pytest.mark.parametrize("wire", WIRES, ids=list(WIRES))
def test_tool_calls_reply_parses_back_to_the_same_calls(wire: str) -> None:
    """The canonical reply form, read by the client, gives the same calls with the same types."""
    parts = tool_calls_reply(CALLS)
    assert kinds(parts) == ["tool_calls"]
    reply = WIRES[wire](Message(role=Role.ROLE_AGENT, parts=parts, message_id="m1"))
    parsed = parse_reply(*reply_parts(reply))
    assert parsed.text is None
    assert [(c.name, c.id) for c in parsed.tool_calls] == [(c.name, c.id) for c in CALLS]
    parameters = {t["function"]["name"]: t["function"]["parameters"] for t in tool_schemas("airline")}
    restored = [restore_arguments(c.arguments, parameters[c.name]) for c in parsed.tool_calls]
    assert typed(restored) == typed([c.arguments for c in CALLS])


@pytest.mark.parametrize("wire", WIRES, ids=list(WIRES))
def test_tool_calls_reply_with_arguments_as_text_keeps_every_number_as_it_is(wire: str) -> None:
    """The baseline agent's form: 2.0 where the schema says integer, and 2 where it says number, reach tau2 as the
    model wrote them, as they reach tau2's own llm_agent."""
    calls = [ToolCallRequest(name="update_reservation_baggages", id="c1", arguments={
                 "reservation_id": "YAX4DR", "total_baggages": 2.0, "nonfree_baggages": 0, "payment_id": "p"}),
             ToolCallRequest(name="send_certificate", arguments={"user_id": "u", "amount": 100})]
    reply = WIRES[wire](Message(role=Role.ROLE_AGENT, parts=tool_calls_reply(calls, arguments_as_text=True),
                                message_id="m1"))
    parsed = parse_reply(*reply_parts(reply))
    parameters = {t["function"]["name"]: t["function"]["parameters"] for t in tool_schemas("airline")}
    assert [typed(call_arguments(c, parameters[c.name])) for c in parsed.tool_calls] == [
        typed(c.arguments) for c in calls]


def test_reply_content_of_a_task_reads_status_message_and_artifacts() -> None:
    """Agents that answer with a Task put the reply in its status message and/or artifacts."""
    task = Task(
        id="t1",
        context_id="ctx-1",
        status=TaskStatus(
            state=TaskState.TASK_STATE_INPUT_REQUIRED,
            message=Message(role=Role.ROLE_AGENT, message_id="m2", parts=[new_text_part("Which flight?")]),
        ),
        artifacts=[Artifact(artifact_id="a1", parts=[new_data_part({"tool_calls": []}), new_text_part("note")])],
    )
    assert reply_content(through_task_json(task)) == (["Which flight?", "note"], [{"tool_calls": []}])
    assert reply_parts(task) == (["Which flight?", "note"], [DataPart({"tool_calls": []})])
    assert parse_reply(*reply_parts(task)) == ParsedReply(text="Which flight?\nnote", tool_calls=[])


def through_task_json(task: Task) -> Task:
    return Parse(MessageToJson(task), Task())


def test_reply_content_of_a_task_without_status_message() -> None:
    task = Task(id="t2", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED),
                artifacts=[Artifact(artifact_id="a", parts=[new_text_part("Done.")])])
    assert reply_content(task) == (["Done."], [])


def test_part_size_text_is_the_text_or_the_data_as_sorted_json() -> None:
    assert part_size_text(new_text_part("Hello")) == "Hello"
    assert part_size_text(new_data_part({"b": 1, "a": "x"})) == '{"a": "x", "b": 1.0}'


# -- ADK function calls and function responses -----------------------------------------


def adk_function_call(name: str, args: dict[str, Any], call_id: str | None) -> Part:
    """A function call as google-adk itself puts it on the wire."""
    call = genai_types.FunctionCall(name=name, args=args, id=call_id)
    return convert_genai_part_to_a2a_part(genai_types.Part(function_call=call))


@pytest.mark.parametrize("wire", WIRES, ids=list(WIRES))
def test_adk_function_call_parts_parse_with_their_metadata(wire: str) -> None:
    """ADK's own function-call parts become calls in the adk form, typed again by the schema."""
    parts = [adk_function_call(c.name, c.arguments, c.id) for c in CALLS]
    reply = WIRES[wire](Message(role=Role.ROLE_AGENT, parts=parts, message_id="m1"))
    texts, data_parts = reply_parts(reply)
    assert texts == [] and [p.metadata for p in data_parts] == [{"adk_type": "function_call"}] * len(CALLS)
    parsed = parse_reply(texts, data_parts)
    assert [(c.name, c.id, c.form) for c in parsed.tool_calls] == [(c.name, c.id, "adk") for c in CALLS]
    parameters = {t["function"]["name"]: t["function"]["parameters"] for t in tool_schemas("airline")}
    restored = [restore_arguments(c.arguments, parameters[c.name]) for c in parsed.tool_calls]
    assert typed(restored) == typed([c.arguments for c in CALLS])


def test_reply_content_leaves_out_the_metadata() -> None:
    """What a reply's size and the logs count stays the data alone."""
    reply = Message(role=Role.ROLE_AGENT, message_id="m", parts=[adk_function_call("list_all_airports", {}, "a")])
    assert reply_content(reply) == ([], [{"name": "list_all_airports", "id": "a", "args": {}}])


ADK_RESULTS = [
    ToolResult(id="adk-1", name="get_user_details", content='{"user_id": "sara_doe_496"}', form="adk"),
    ToolResult(id="adk-2", name="cancel_reservation", content="Error: reservation not found", error=True, form="adk"),
]


@pytest.mark.parametrize("wire", WIRES, ids=list(WIRES))
def test_results_of_adk_calls_also_go_back_as_adk_function_responses(wire: str) -> None:
    """ADK's converter reads each extra part back into the FunctionResponse its agent waits for."""
    parts = list(WIRES[wire](message(tool_results_turn(ADK_RESULTS))).parts)
    assert kinds(parts) == ["tool_results"] * 4
    assert [MessageToDict(p.metadata) for p in parts[2:]] == [
        {"tau2_kind": "tool_results", "adk_type": "function_response"}
    ] * 2
    responses = [convert_a2a_part_to_genai_part(p).function_response for p in parts[2:]]
    assert [(r.id, r.name, r.response) for r in responses] == [
        ("adk-1", "get_user_details", {"result": '{"user_id": "sara_doe_496"}'}),
        ("adk-2", "cancel_reservation", {"result": "Error: reservation not found"}),
    ]
    assert read_turn(message(parts)) == IncomingTurn(tool_results=ADK_RESULTS)


def test_only_results_of_adk_calls_get_adk_parts() -> None:
    parts = tool_results_turn([RESULTS[0], ADK_RESULTS[0], RESULTS[1]])
    adk_parts = [p for p in parts if "adk_type" in p.metadata]
    assert [MessageToDict(p.data)["id"] for p in adk_parts] == ["adk-1"]
    assert read_turn(message(parts)).tool_results == [RESULTS[0], ADK_RESULTS[0], RESULTS[1]]


class AdkFormOracle(AsksForInput):
    """The oracle asking for its golden actions as a google-adk agent with long-running tools
    does: function-call data parts in a task left waiting for input."""

    def next_parts(self, context_id: str) -> list[Part]:
        plan = self.plans.get(context_id)
        if not plan or plan[0].tool_name is None:
            return super().next_parts(context_id)
        step = plan.popleft()
        return [adk_function_call(step.tool_name, step.arguments or {}, f"adk-{uuid.uuid4().hex[:8]}")]


def test_adk_function_calls_over_a_real_run(serve: Serve, tmp_path: Path) -> None:
    """Tasks with integer arguments (a certificate amount; nested payment amounts) score 1.0, and
    every result comes back to the agent as the ADK function response of its call."""
    agent = AdkFormOracle()
    server = serve(lambda url: agent_app(agent, url))
    outcome = run_a2a(server.url, tmp_path, "airline", task_ids=["2", "8"])
    assert {s.task_id: s.reward_info.reward for s in outcome.results.simulations} == {"2": 1.0, "8": 1.0}
    answered = 0
    for task in ("2", "8"):
        exchanges = agent.messages_of(task)
        for asked, answer in zip(exchanges, exchanges[1:]):
            calls = parse_reply(*reply_parts(Message(parts=asked.reply_parts))).tool_calls
            responses = [
                convert_a2a_part_to_genai_part(p).function_response for p in answer.parts if "adk_type" in p.metadata
            ]
            assert [(r.id, r.name) for r in responses] == [(c.id, c.name) for c in calls]
            assert [r.response for r in responses] == [{"result": r.content} for r in answer.turn.tool_results]
            answered += len(calls)
    golden = {task.id: task for task in load_tasks("airline")}
    assert answered == sum(len(golden[task].evaluation_criteria.actions) for task in ("2", "8"))  # 4 + 4 in 26.3


def test_a_data_part_json_cannot_carry_is_a_malformed_reply() -> None:
    """Over gRPC a data part may hold Infinity, which no JSON can: the reply is malformed, said as such."""
    from a2a.helpers import new_message

    from tau2_a2a.protocol.messages import reply_parts
    from tau2_a2a.protocol.toolcalls import MalformedReply

    part = new_data_part({"tool_calls": []})
    part.data.struct_value.update({"amount": float("inf")})
    with pytest.raises(MalformedReply, match="expected data parts JSON can carry"):
        reply_parts(new_message([part]))
