"""A2A sessions: one context per simulation, kept across its messages, shared with no other.

What the client sent is read off the wire (middleware on the agent's server),
not taken from the client's own records, so these tests see what an agent sees.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tau2.data_model.simulation import TerminationReason

from tau2_a2a.client.config import A2AConfig
from tau2_a2a.client.session import A2ASession
from tau2_a2a.protocol.hosting import BackgroundServer, free_port
from tau2_a2a.protocol.messages import user_turn
from tau2_a2a.tau2bench.participants.oracle_script import oracle_steps
from tests.support.executors import AsksForInput, FinishesLater, Seen, WaitsForPeers, agent_app
from tests.support.middleware import HttpExchange, WireLog, middleware
from tests.support.records import by_task, records_of
from tests.support.runs import FAST, Serve, run_a2a

TASKS = ["1", "5"]


def conversations(exchanges: list[HttpExchange]) -> dict[str, list[HttpExchange]]:
    """SendMessage requests by the context they belong to: the one they name, or, for a
    first message that names none, the one the agent's reply opened."""
    by_context: dict[str, list[HttpExchange]] = defaultdict(list)
    for exchange in exchanges:
        if exchange.rpc_method == "SendMessage":
            context = exchange.sent_message.get("contextId") or exchange.reply_context_id
            assert context, "a SendMessage that neither names nor opens a context"
            by_context[context].append(exchange)
    return dict(by_context)


def received(agent: Any) -> dict[str, list[Seen]]:
    """The messages the agent received, by context."""
    by_context: dict[str, list[Seen]] = defaultdict(list)
    for seen in agent.seen:
        by_context[seen.context_id].append(seen)
    return dict(by_context)


@pytest.fixture(scope="module")
def concurrent_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two tasks, two trials each, four simulations at a time, against an agent that
    holds its first replies until four conversations are open together."""
    wire: list[HttpExchange] = []
    agent = WaitsForPeers(peers=4)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with BackgroundServer(agent_app(agent, url, [middleware(WireLog, exchanges=wire)]), port=port):
        outcome = run_a2a(url, tmp_path_factory.mktemp("concurrent"), task_ids=TASKS, num_trials=2,
                          max_concurrency=4, a2a=A2AConfig(endpoint=url, retry=FAST))
    yield {"outcome": outcome, "agent": agent, "wire": wire}


def test_every_simulation_of_the_concurrent_run_scores(concurrent_run: dict[str, Any]) -> None:
    simulations = concurrent_run["outcome"].results.simulations
    assert sorted((s.task_id, s.trial) for s in simulations) == sorted(
        (task, trial) for task in TASKS for trial in (0, 1))
    assert {s.reward_info.reward for s in simulations} == {1.0}
    assert {s.termination_reason for s in simulations} == {TerminationReason.USER_STOP}


def test_context_id_returned_is_sent_back_with_every_later_message(concurrent_run: dict[str, Any]) -> None:
    by_context = conversations(concurrent_run["wire"])
    assert len(by_context) == 4
    for context, exchanges in by_context.items():
        # The first message names no context; the agent opens one, and every later message names it.
        assert [e.sent_message.get("contextId") for e in exchanges] == [None] + [context] * (len(exchanges) - 1)
        assert [e.reply_context_id for e in exchanges] == [context] * len(exchanges)
    # The client's records agree with the wire, simulation by simulation.
    for simulation in concurrent_run["outcome"].metrics["simulations"]:
        contexts = {r["context_id"] for r in simulation["requests"]}
        assert len(contexts) == 1
        [context] = contexts
        assert len(by_context[context]) == len(simulation["requests"])


def test_fresh_context_per_task_and_per_trial(concurrent_run: dict[str, Any]) -> None:
    agent = concurrent_run["agent"]
    context_of: dict[tuple[str, int], set[str]] = defaultdict(set)
    for simulation in concurrent_run["outcome"].metrics["simulations"]:
        for record in simulation["requests"]:
            context_of[(simulation["task_id"], simulation["trial"])].add(record["context_id"])
    assert sorted(context_of) == sorted((task, trial) for task in TASKS for trial in (0, 1))
    assert all(len(contexts) == 1 for contexts in context_of.values())
    every_context = [context for contexts in context_of.values() for context in contexts]
    assert len(set(every_context)) == 4
    # Each context was opened by the scripted user of its own task.
    assert {key: agent.task_of[next(iter(contexts))] for key, contexts in context_of.items()} == {
        key: key[0] for key in context_of}


def test_concurrent_simulations_share_nothing(concurrent_run: dict[str, Any]) -> None:
    agent = concurrent_run["agent"]
    assert agent.max_open == 4  # four conversations really were open at once
    by_context = received(agent)
    assert len(by_context) == 4
    for context, messages in by_context.items():
        task = agent.task_of[context]
        steps = oracle_steps("airline", task)
        # One message per golden step; the system prompt and tools only in the first.
        assert len(messages) == len(steps)
        assert [m.turn.system is not None for m in messages] == [True] + [False] * (len(steps) - 1)
        assert [m.turn.tools is not None for m in messages] == [True] + [False] * (len(steps) - 1)
        # The tool results that came back are those of this task's own calls, in order.
        assert [r.name for m in messages for r in m.turn.tool_results] == [
            s.tool_name for s in steps if s.tool_name is not None]
        assert {m.task for m in messages} == {task}


def test_task_left_in_input_required_is_continued(serve: Serve, tmp_path: Path) -> None:
    """Each reply is a Task waiting for input; the next message must continue that same task."""
    wire: list[HttpExchange] = []
    agent = AsksForInput()
    server = serve(lambda url: agent_app(agent, url, [middleware(WireLog, exchanges=wire)]))
    outcome = run_a2a(server.url, tmp_path, task_ids=["1", "5"],
                      a2a=A2AConfig(endpoint=server.url, retry=FAST))
    assert {t: s.reward_info.reward for t, s in by_task(outcome).items()} == {"1": 1.0, "5": 1.0}
    by_context = conversations(wire)
    assert len(by_context) == 2
    for context, exchanges in by_context.items():
        task_ids = [e.reply_task["id"] for e in exchanges]
        assert len(set(task_ids)) == 1  # one A2A task for the whole conversation
        assert [e.sent_message.get("taskId") for e in exchanges] == [None] + task_ids[:-1]
        assert [e.reply_task["status"]["state"] for e in exchanges] == (
            ["TASK_STATE_INPUT_REQUIRED"] * (len(exchanges) - 1) + ["TASK_STATE_COMPLETED"])
        assert [m.continued for m in received(agent)[context]] == [False] + [True] * (len(exchanges) - 1)
    for task in ("1", "5"):
        assert {r["error"] for r in records_of(outcome, task)} == {None}


def test_task_left_working_is_polled_until_done(serve: Serve, tmp_path: Path) -> None:
    """Each reply is a Task still WORKING, completed half a second later: the client polls GetTask."""
    wire: list[HttpExchange] = []
    server = serve(lambda url: agent_app(FinishesLater(delay=0.5), url, [middleware(WireLog, exchanges=wire)]))
    outcome = run_a2a(server.url, tmp_path, task_ids=["1"], a2a=A2AConfig(endpoint=server.url, retry=FAST))
    assert by_task(outcome)["1"].reward_info.reward == 1.0
    access_check, *calls = [e for e in wire if e.method == "POST"]  # the run's access check comes first
    assert access_check.rpc_method == "GetTask" and "TASK_NOT_FOUND" in access_check.response_body.decode()
    records = records_of(outcome, "1")
    # One record per request, in the order the agent received them.
    assert [r["method"] for r in records] == [e.rpc_method for e in calls]
    assert [r["http_status"] for r in records] == [e.status for e in calls]
    # Every turn: SendMessage answered WORKING, polls answered WORKING, the last poll COMPLETED.
    turns: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for record, call in zip(records, calls):
        turns[record["turn"]].append((record["method"], call.reply_task["status"]["state"]))
    assert sorted(turns) == [0, 1, 2]
    for exchange in turns.values():
        assert exchange[0] == ("SendMessage", "TASK_STATE_WORKING")
        assert exchange[-1] == ("GetTask", "TASK_STATE_COMPLETED")
        assert exchange[1:-1] == [("GetTask", "TASK_STATE_WORKING")] * (len(exchange) - 2)
    assert {r["error"] for r in records} == {None}
    assert {r["context_id"] for r in records} == {calls[0].reply_context_id}


async def test_a_session_called_from_inside_an_event_loop_still_answers(oracle_url: str) -> None:
    """A caller that is itself a coroutine cannot have its loop blocked: its requests run on the session's own loop."""
    session = A2ASession(A2AConfig(endpoint=oracle_url, retry=FAST))
    try:
        exchange = session.send(user_turn("Hello"), None, None, 0)
    finally:
        session.close()
    assert exchange.context_id
    [record] = exchange.records
    assert (record.method, record.error, record.http_status, record.events) == ("SendMessage", None, 200, 1)
    assert record.request_bytes > 0 and record.response_bytes > 0 and record.output_tokens > 0
