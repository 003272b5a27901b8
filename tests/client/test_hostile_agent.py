"""A hostile agent under test can at worst fail its own simulations: limits and deadlines, against a real one.

The agent is testbed/hostile_agent.py on loopback (a2a-sdk's servers, gRPC
included; a TCP relay that dribbles its responses a byte at a time). Each
test gives the run a few seconds where a limit is a time, and checks only
that the run ended within a generous bound, never how fast.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest
from a2a.helpers import new_text_part

from tau2_a2a.client.config import A2AConfig, ConfigError, RetryPolicy
from tau2_a2a.client.errors import AgentRequestAborted, AgentTimeout
from tau2_a2a.client.session import A2ASession
from tau2_a2a.client.transport import Wire
from testbed.hostile_agent import HostileAgent, Hostility
from tests.support.records import records_of
from tests.support.runs import run_a2a
from tests.support.waiting import wait_until

ONCE = RetryPolicy(max_attempts=1)
GENEROUS = 120.0  # seconds a run cut off after a few may take on a busy 2-core machine


def started(agents: list[HostileAgent], hostility: Hostility, grpc: bool = False) -> HostileAgent:
    agent = HostileAgent(hostility, grpc=grpc).start()
    agents.append(agent)
    return agent


def ended_by(outcome, task: str) -> dict:
    """The failed request that ended the simulation of `task`."""
    [failed] = [record for record in records_of(outcome, task) if record["error"]]
    return failed


# -- tool-call flood -------------------------------------------------------------------------------------------------

def test_a_flood_of_tool_calls_ends_each_simulation_at_the_per_reply_limit_and_the_run_goes_on(
        hostile: list[HostileAgent], tmp_path: Path) -> None:
    agent = started(hostile, Hostility(flood=10_000))
    outcome = run_a2a(agent.url, tmp_path, task_ids=["0", "1"])
    assert outcome.metrics["run"]["simulations_ended_by_a2a_errors"] == {"limit": 2}
    for simulation in outcome.results.simulations:
        assert simulation.termination_reason.value == "agent_error"
        assert not [m for m in simulation.messages if m.role == "tool"]  # none of the calls ran
    failed = ended_by(outcome, "0")
    assert failed["error"] == "limit"
    assert failed["error_message"] == (
        f"the agent at {agent.url} asked for 10000 tool calls in one reply, over the limit of 128 "
        "(--a2a-max-tool-calls-per-reply); none of them ran and its simulation ends here. Raise "
        "--a2a-max-tool-calls-per-reply if the agent really needs more.")
    assert outcome.results_path.stat().st_size < 200_000  # the results hold two short simulations


def test_tool_calls_past_the_per_simulation_limit_end_it_after_those_within_ran(hostile: list[HostileAgent],
                                                                               tmp_path: Path) -> None:
    agent = started(hostile, Hostility(flood=5))
    outcome = run_a2a(agent.url, tmp_path, task_ids=["0"],
                      a2a=A2AConfig(endpoint=agent.url, retry=ONCE, max_tool_calls=12))
    [simulation] = outcome.results.simulations
    assert len([m for m in simulation.messages if m.role == "tool"]) == 10  # two replies of 5 ran, the third not
    assert ended_by(outcome, "0")["error_message"] == (
        f"the agent at {agent.url} asked for 15 tool calls in one simulation, over the limit of 12 "
        "(--a2a-max-tool-calls); the last reply's calls did not run and its simulation ends here. Raise "
        "--a2a-max-tool-calls if the agent really needs more.")


def test_a_request_over_the_limit_is_not_sent_and_ends_its_simulation(hostile: list[HostileAgent],
                                                                      tmp_path: Path) -> None:
    """The opening request (policy, tools: 32 KB) fits; the next one, 40 results of list_all_airports (77 KB), not."""
    agent = started(hostile, Hostility(flood=40))
    outcome = run_a2a(agent.url, tmp_path, task_ids=["0"],
                      a2a=A2AConfig(endpoint=agent.url, retry=ONCE, max_request_bytes=50_000))
    failed = ended_by(outcome, "0")
    assert (failed["error"], failed["turn"], failed["request_bytes"]) == ("limit", 1, 0)
    assert re.fullmatch(
        rf"POST {re.escape(agent.url)}/? would send (\d+) bytes, over the limit of 50000 \(--a2a-max-request-bytes\); "
        r"it was not sent and its simulation ends here\. The tool results going back to the agent make up most of "
        r"a request: raise --a2a-max-request-bytes if the agent really needs this much\.", failed["error_message"])
    assert agent.executor.messages == 1  # the agent never got the second request


def test_limits_are_whole_numbers_from_one(tmp_path: Path) -> None:
    for name, flag in (("max_tool_calls_per_reply", "--a2a-max-tool-calls-per-reply"),
                       ("max_tool_calls", "--a2a-max-tool-calls"), ("max_request_bytes", "--a2a-max-request-bytes")):
        with pytest.raises(ConfigError) as refused:
            A2AConfig(endpoint="http://127.0.0.1:9", **{name: 0})
        assert str(refused.value) == f"{flag} must be a whole number from 1 to 1099511627776, got 0."


def test_limits_at_their_defaults_leave_the_record_as_earlier_runs_kept_it() -> None:
    record = A2AConfig(endpoint="http://127.0.0.1:9").as_record()
    assert not {"a2a_max_tool_calls_per_reply", "a2a_max_tool_calls", "a2a_max_request_bytes"} & set(record)
    changed = A2AConfig(endpoint="http://127.0.0.1:9", max_tool_calls=7, max_request_bytes=9_000)
    assert changed.as_record()["a2a_max_tool_calls"] == 7
    assert A2AConfig.from_record(changed.as_record()) == changed


# -- deadlines -----------------------------------------------------------------------------------------------------

def test_a_card_trickled_a_byte_at_a_time_headers_first_is_cut_off_at_the_deadline(hostile: list[HostileAgent]) -> None:
    agent = started(hostile, Hostility(trickle="card", trickle_seconds=0.5))
    began = time.monotonic()
    with A2ASession(A2AConfig(endpoint=agent.url, timeout=3, retry=ONCE)) as session:
        with pytest.raises(AgentTimeout) as timed_out:
            _ = session.card
    assert time.monotonic() - began < GENEROUS
    assert str(timed_out.value) == (f"Fetching the agent card {agent.url}/.well-known/agent-card.json timed out "
                                    "after 3s; raise --a2a-timeout if the agent is slow.")
    assert agent.relay is not None and agent.relay.trickled >= 1


@pytest.mark.parametrize("transport", ["jsonrpc", "http-json"])
def test_a_blocking_reply_trickled_a_byte_at_a_time_is_cut_at_the_deadline_and_not_sent_again(
        hostile: list[HostileAgent], tmp_path: Path, transport: str) -> None:
    """The agent is up and answering, a byte at a time, headers first: retrying would only take as long again."""
    agent = started(hostile, Hostility(trickle="reply", trickle_seconds=0.5))
    began = time.monotonic()
    outcome = run_a2a(agent.url, tmp_path, task_ids=["0"],
                      a2a=A2AConfig(endpoint=agent.url, timeout=3, retry=RetryPolicy(max_attempts=3),
                                    transport=transport))
    assert time.monotonic() - began < GENEROUS
    records = records_of(outcome, "0")
    assert (records[0]["method"], records[0]["http_status"]) == ("SendMessage", None)
    assert [(r["turn"], r["attempt"], r["error"]) for r in records] == [(0, 1, "timeout")]  # one attempt
    assert re.fullmatch(rf"SendMessage to {re.escape(agent.url)} timed out after 3s with its reply begun "
                        r"\(\d+ bytes in\): the agent is answering, so the request was not sent again; raise "
                        r"--a2a-timeout if the agent is this slow\.",
                        records[0]["error_message"])
    [simulation] = outcome.results.simulations
    assert simulation.messages[-1].content == f"[A2A timeout error] {records[0]['error_message']}"
    assert agent.executor.messages == 1 and agent.relay is not None and agent.relay.trickled == 1


@pytest.mark.parametrize("transport", ["jsonrpc", "grpc"])
def test_a_stream_still_flowing_at_the_deadline_is_cut_once_not_sent_again(hostile: list[HostileAgent],
                                                                           tmp_path: Path, transport: str) -> None:
    agent = started(hostile, Hostility(drip_seconds=0.5), grpc=True)
    outcome = run_a2a(agent.url, tmp_path, task_ids=["0"],
                      a2a=A2AConfig(endpoint=agent.url, timeout=3, retry=RetryPolicy(max_attempts=3),
                                    transport=transport, streaming=True))
    [failed] = records_of(outcome, "0")
    assert (failed["attempt"], failed["method"], failed["error"]) == (1, "SendStreamingMessage", "timeout")
    assert failed["events"] >= 1
    assert failed["error_message"] == (
        f"SendStreamingMessage to {agent.url} timed out after 3s with its reply begun ({failed['events']} "
        f"event{'' if failed['events'] == 1 else 's'} in): the agent is answering, so the request was not sent "
        "again; raise --a2a-timeout if the agent is this slow.")
    assert agent.executor.messages == 1


def test_a_silent_reply_is_retried_and_the_last_failure_says_how_each_attempt_ended(
        hostile: list[HostileAgent], tmp_path: Path) -> None:
    """Nothing of the reply came: the request may have been lost, so it is sent again, as a refused connection
    or an HTTP 503 would be."""
    agent = started(hostile, Hostility(stall=True))
    outcome = run_a2a(agent.url, tmp_path, task_ids=["0"],
                      a2a=A2AConfig(endpoint=agent.url, timeout=2, retry=RetryPolicy(2, 0.05)))
    records = records_of(outcome, "0")
    message = f"SendMessage to {agent.url} timed out after 2s; raise --a2a-timeout if the agent is slow."
    assert [(r["attempt"], r["error"], r["error_message"]) for r in records] == [(1, "timeout", message),
                                                                                 (2, "timeout", message)]
    [simulation] = outcome.results.simulations
    assert simulation.messages[-1].content == (f"[A2A timeout error] {message.removesuffix('.')} "
                                               "(2 attempts: timeout, timeout).")
    assert agent.executor.messages == 2


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
def test_a_stalled_grpc_reply_ends_its_simulation_at_the_deadline(hostile: list[HostileAgent], tmp_path: Path,
                                                                  streaming: bool) -> None:
    agent = started(hostile, Hostility(stall=True), grpc=True)
    began = time.monotonic()
    outcome = run_a2a(agent.url, tmp_path, task_ids=["0"],
                      a2a=A2AConfig(endpoint=agent.url, timeout=3, retry=ONCE, transport="grpc", streaming=streaming))
    assert time.monotonic() - began < GENEROUS
    failed = ended_by(outcome, "0")
    method = "SendStreamingMessage" if streaming else "SendMessage"
    # our own timer cuts the whole call, a stream's too: no status came back
    assert (failed["error"], failed["transport"], failed["grpc_status"], failed["method"]) == (
        "timeout", "GRPC", None, method)
    assert failed["error_message"] == (f"{method} to {agent.url} timed out after 3s; raise --a2a-timeout if the "
                                       "agent is slow.")


# -- ending a request from another thread ---------------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["jsonrpc", "grpc"])
def test_a_request_in_flight_is_aborted_from_another_thread(hostile: list[HostileAgent], transport: str) -> None:
    """What ends the open A2A request of a simulation that ended: its Wire, shut from the outside."""
    agent = started(hostile, Hostility(stall=True), grpc=True)
    wires: list[Wire] = []
    ended: list[BaseException] = []
    with A2ASession(A2AConfig(endpoint=agent.url, timeout=600, retry=RetryPolicy(max_attempts=3),
                              transport=transport)) as session:
        _ = session.card

        def send() -> None:
            try:
                session.send([new_text_part("hello")], None, None, 0, on_request=wires.append)
            except BaseException as error:  # noqa: BLE001  (what ended it is the point)
                ended.append(error)

        sender = threading.Thread(target=send)
        sender.start()
        def in_flight() -> bool:  # the agent holds the message
            assert sender.is_alive()
            return agent.executor.messages >= 1

        wait_until(in_flight, "the request in flight", GENEROUS, 0.05)
        [wire] = wires
        wire.abort()
        sender.join(GENEROUS)
        assert not sender.is_alive()
    [error] = ended
    assert isinstance(error, AgentRequestAborted)
    assert str(error) == "the request was aborted before its reply came (its simulation ended)"
    assert len(wires) == 1  # not retried
    assert [r.error for r in error.records] == ["aborted"]


def test_a_request_aborted_before_it_begins_fails_as_it_begins(hostile: list[HostileAgent]) -> None:
    agent = started(hostile, Hostility())
    with A2ASession(A2AConfig(endpoint=agent.url, retry=ONCE)) as session:
        _ = session.card
        with pytest.raises(AgentRequestAborted):
            session.send([new_text_part("hello")], None, None, 0, on_request=Wire.abort)
    assert agent.executor.messages == 0


# -- what an endpoint URL may not carry ------------------------------------------------------------------------------

@pytest.mark.parametrize("endpoint, line", [
    ("http://alice:hunter2@127.0.0.1:9000",
     "--a2a-endpoint http://127.0.0.1:9000 must not carry a user name or password (user:password@host): it would be "
     "printed and kept with the results. Pass the agent's token with --a2a-auth-token or TAU2_A2A_AUTH_TOKEN."),
    ("http://127.0.0.1:9000/agent?token=hunter2",
     "--a2a-endpoint http://127.0.0.1:9000/... must not carry a query string or fragment: the agent card is fetched "
     "from URL/.well-known/agent-card.json, so pass the agent's base URL alone; a token goes in --a2a-auth-token or "
     "TAU2_A2A_AUTH_TOKEN."),
    ("https://agent.example.com/#hunter2",
     "--a2a-endpoint https://agent.example.com/... must not carry a query string or fragment: the agent card is "
     "fetched from URL/.well-known/agent-card.json, so pass the agent's base URL alone; a token goes in "
     "--a2a-auth-token or TAU2_A2A_AUTH_TOKEN."),
])
def test_an_endpoint_with_credentials_query_or_fragment_is_refused_showing_only_its_origin(endpoint: str,
                                                                                          line: str) -> None:
    with pytest.raises(ConfigError) as refused:
        A2AConfig(endpoint=endpoint)
    assert str(refused.value) == line
    assert "hunter2" not in str(refused.value) and "alice" not in str(refused.value)
