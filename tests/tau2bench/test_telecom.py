"""Telecom, tau2's dual-control domain, over A2A: the user acts on its phone, the agent only hears about it.

The oracle hands the user's golden actions over in words; the scripted user
does them with tau2's user tools through tau2's orchestrator. CI runs a subset
(both requestors, the user alone, the agent alone); bench/oracle_fidelity.py
--domains telecom runs the whole base split.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from a2a.server.agent_execution import RequestContext
from a2a.server.events import EventQueue
from a2a.types import Message as A2AMessage
from google.protobuf.json_format import MessageToDict

from tau2_a2a.client.records import RAW_DATA_KEY
from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, free_port
from tau2_a2a.protocol.messages import read_turn
from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card
from tau2_a2a.tau2bench.run.fidelity import trajectory_differences
from tau2_a2a.tau2bench.seam.distribution import (
    AssistantMessage,
    LLMAgent,
    Task,
    ToolMessage,
    UserMessage,
    is_valid_agent_history_message,
    load_tasks,
    registry,
)
from tests.support.runs import run_a2a, run_native_oracle
from tests.support.service import ask, result_data, start_service

BASE = {task.id: task for task in load_tasks("telecom", task_split_name="base")}


def requestors(task: Task) -> frozenset[str]:
    return frozenset(action.requestor for action in task.evaluation_criteria.actions or [])


def hand_overs(task: Task) -> int:
    """How often the golden actions pass from the agent to the user."""
    actions = task.evaluation_criteria.actions or []
    return sum(1 for i, a in enumerate(actions) if a.requestor == "user" and (i == 0 or actions[i - 1].requestor != "user"))


def first_of_kind(kind: set[str], count: int) -> list[str]:
    return [task_id for task_id, task in BASE.items() if requestors(task) == kind][:count]


BOTH = first_of_kind({"assistant", "user"}, 2) + [max(BASE, key=lambda i: hand_overs(BASE[i]))]
USER_ALONE = first_of_kind({"user"}, 2)
AGENT_ALONE = first_of_kind({"assistant"}, 1)
SUBSET = BOTH + USER_ALONE + AGENT_ALONE


def test_the_subset_has_every_kind_of_task() -> None:
    assert len(set(SUBSET)) == 6
    assert hand_overs(BASE[BOTH[-1]]) >= 3  # user, agent, user, agent, user...


def test_telecom_over_a2a_matches_native(oracle_url: str, tmp_path: Path) -> None:
    over_a2a = run_a2a(oracle_url, tmp_path / "a2a", "telecom", task_ids=SUBSET, num_trials=2,
                       max_concurrency=3).results
    native = run_native_oracle(tmp_path / "native", "telecom", task_ids=SUBSET, num_trials=2, max_concurrency=3)

    expected = {(task_id, trial): 1.0 for task_id in SUBSET for trial in (0, 1)}
    assert {(s.task_id, s.trial): s.reward_info.reward for s in over_a2a.simulations} == expected
    assert {(s.task_id, s.trial): s.reward_info.reward for s in native.simulations} == expected
    assert trajectory_differences(over_a2a, native) == []
    for simulation in over_a2a.simulations:
        golden = BASE[simulation.task_id].evaluation_criteria.actions or []
        calls = [(c.requestor, c.name, c.arguments) for m in simulation.messages
                 if isinstance(m, (AssistantMessage, UserMessage)) for c in (m.tool_calls or [])]
        assert calls == [(a.requestor, a.name, a.arguments) for a in golden]
        results = [m for m in simulation.messages if isinstance(m, ToolMessage)]
        assert [m.requestor for m in results] == [a.requestor for a in golden]
        assert not any(m.error for m in results)
        assert simulation.termination_reason == "user_stop"


class RecordingOracle(OracleExecutor):
    """The oracle, keeping every message it received, by A2A context."""

    def __init__(self) -> None:
        super().__init__()
        self.received: dict[str, list[A2AMessage]] = defaultdict(list)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.received[context.context_id].append(context.message)
        await super().execute(context, event_queue)


def test_the_agent_hears_the_users_words_and_never_sees_the_device(tmp_path: Path) -> None:
    oracle = RecordingOracle()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    task_ids = [BOTH[-1], USER_ALONE[0]]
    with BackgroundServer(a2a_app(oracle, oracle_card(url)), port=port):
        results = run_a2a(url, tmp_path, "telecom", task_ids=task_ids).results
    assert {s.task_id: s.reward_info.reward for s in results.simulations} == dict.fromkeys(task_ids, 1.0)

    environment = registry.get_env_constructor("telecom")()
    native_agent = LLMAgent(tools=environment.get_tools(), domain_policy=environment.get_policy(), llm="none")
    user_tools = {tool.name for tool in environment.get_user_tools()}
    for simulation in results.simulations:
        contexts = {m.raw_data[RAW_DATA_KEY]["context_id"] for m in simulation.messages
                    if isinstance(m, AssistantMessage) and m.raw_data}
        assert len(contexts) == 1
        received = oracle.received[contexts.pop()]
        user_calls = [c for m in simulation.messages if isinstance(m, UserMessage) for c in (m.tool_calls or [])]
        device_results = [m for m in simulation.messages if isinstance(m, ToolMessage) and m.requestor == "user"]
        assert user_calls and len(device_results) == len(user_calls)

        # The agent got the user's words (all but the final stop), and results of its own calls only.
        user_words = [m.content for m in simulation.messages
                      if isinstance(m, UserMessage) and not m.is_tool_call()][:-1]
        assert [read_turn(m).user_text for m in received if read_turn(m).user_text is not None] == user_words
        agent_call_ids = [c.id for m in simulation.messages
                          if isinstance(m, AssistantMessage) for c in (m.tool_calls or [])]
        assert [r.id for m in received for r in read_turn(m).tool_results] == agent_call_ids
        wire = json.dumps([MessageToDict(m) for m in received])
        carrier_results = [m for m in simulation.messages if isinstance(m, ToolMessage) and m.requestor == "assistant"]
        assert all(on_the_wire(m.content, wire) for m in carrier_results)  # the search finds what was sent
        assert not any(on_the_wire(m.content, wire) for m in device_results)
        assert not any(call.id in wire for call in user_calls)

        # The first message is what tau2's own llm_agent would be given: its system prompt,
        # the carrier's tools (none of the user's), the history before the user's first words.
        first = read_turn(received[0])
        assert first.system == native_agent.system_prompt
        assert first.tools == [tool.openai_schema for tool in native_agent.tools]
        assert not user_tools & {schema["function"]["name"] for schema in first.tools}
        opening = next(i for i, m in enumerate(simulation.messages) if isinstance(m, UserMessage))
        history = [m for m in simulation.messages[:opening] if is_valid_agent_history_message(m)]
        assert first.history == [{"role": m.role, "content": m.content} for m in history]
        assert first.history == [{"role": "assistant", "content": "Hi! How can I help you today?"}]
        assert first.user_text == simulation.messages[opening].content


def on_the_wire(text: str, wire: str) -> bool:
    """Whether `text` is inside a JSON dump (escaped as JSON escapes it)."""
    return json.dumps(text)[1:-1] in wire


def run_request(endpoint: str, task_ids: list[str]) -> dict[str, Any]:
    return {"domain": "telecom", "agent_endpoint": endpoint, "user": "scripted_user", "user_llm": "scripted",
            "task_ids": task_ids}


@pytest.fixture
def service(tmp_path: Path) -> Any:
    server = start_service(tmp_path / "service")
    yield server
    server.stop()


def test_the_service_evaluates_telecom_with_the_scripted_user(service: Any, oracle_url: str) -> None:
    task_ids = [BOTH[0], USER_ALONE[0], AGENT_ALONE[0]]
    task = asyncio.run(ask(service.url, "run_tau2_evaluation", run_request(oracle_url, task_ids)))
    data = result_data(task)
    assert data["status"] == "completed" and data["domain"] == "telecom"
    assert data["result"]["metrics"]["avg_reward"] == 1.0
    assert data["result"]["metrics"]["num_simulations"] == 3
    assert sorted((t["task_id"], t["rewards"]) for t in data["result"]["tasks"]) == sorted(
        (task_id, [1.0]) for task_id in task_ids)
