"""One trace from tau2 into a real ADK agent: the agent's own spans (its LLM calls, its MCP tool calls) descend
from tau2's simulation span, received by a real OTLP/HTTP receiver on loopback.

The agent is the ADK reference agent (google-adk's own A2A executor) served as
`tau2-a2a agent adk --grpc-port` serves it: JSON-RPC, HTTP+JSON and gRPC, each
continuing the trace a request carries (`tracing.continue_traces`); its model
is the stand-in LLM. Over MCP the same agent sits behind OpenTelemetry's ASGI
middleware instead, the standard way an agent developer turns on incoming trace
context. ADK emits its spans out of the box once a tracer provider is set.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

from tau2_a2a.client.config import A2AConfig, McpServing
from tau2_a2a.client.records import trace_id_of
from tau2_a2a.protocol.hosting import free_port
from tau2_a2a.reference.adk_agent import adk_app
from testbed.standin_llm import MODEL, StandinLLM
from tests.reference.test_adk_agent import golden_calls, trajectory_calls
from tests.support.adk_apps import BINDINGS, adk_agent_on_every_binding
from tests.support.otlp import Span, descends_from
from tests.support.runs import FAST, Serve, run_a2a

TASKS = ["3", "8"]


def simulation_trace(receiver, trace: str) -> tuple[Span, list[Span]]:
    """A simulation's span and every span of its trace (all in once the simulation's span, which ends last
    in this process, is: the agent's spans end before the reply they are part of)."""
    [simulation] = receiver.wait_for(lambda _: [s for s in receiver.trace(trace) if s.name.startswith("simulation ")])
    return simulation, receiver.trace(trace)


def served_here(span: Span, transport: str, method: str) -> bool:
    """Whether `span` is the agent's server span of one `method` call over `transport`, as continue_traces
    makes it: ContinueTrace's `POST PATH` over JSON-RPC (at /) and HTTP+JSON (at /message:send or :stream),
    gRPC's `gRPC /SERVICE/METHOD`."""
    if transport == "grpc":
        return span.name.startswith("gRPC ") and span.attributes.get("rpc.method") == method
    path = "/" if transport == "jsonrpc" else ("/message:stream" if method == "SendStreamingMessage"
                                               else "/message:send")
    return span.name == f"POST {path}" and span.attributes.get("url.path") == path


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
@pytest.mark.parametrize("transport", list(BINDINGS))
def test_adk_llm_calls_descend_from_the_simulation(traced, serve: Serve, tmp_path: Path, transport: str,
                                                   streaming: bool) -> None:
    standin = StandinLLM.serve(serve, tool_calls_as_text=True)
    with adk_agent_on_every_binding(standin.api_base) as agent:
        outcome = run_a2a(agent.url, tmp_path, task_ids=TASKS, a2a=A2AConfig(
            endpoint=agent.url, retry=FAST, transport=transport, streaming=streaming))

    assert {s.task_id: s.reward_info.reward for s in outcome.results.simulations} == dict.fromkeys(TASKS, 1.0)
    method = "SendStreamingMessage" if streaming else "SendMessage"
    records = [r for s in outcome.metrics["simulations"] for r in s["requests"]]
    assert {(r["method"], r["transport"]) for r in records} == {(method, BINDINGS[transport])}
    for run in outcome.results.simulations:
        trace = trace_id_of(run.messages)
        simulation, _ = simulation_trace(traced, trace)
        # One model call per turn of the agent's (each golden call, then its words), each under an A2A request
        # of this simulation: tau2's request -> the agent's server span -> ADK's invocation -> its LLM call. ADK
        # may end the span of a turn's last call after its reply went out: wait for every one.
        expected = len(golden_calls("airline", [run.task_id])[run.task_id]) + 1
        def chained(_: object) -> list[Span] | None:
            """The trace's spans once every LLM call and the spans above it are in."""
            spans = traced.trace(trace)
            calls = [s for s in spans if s.name.startswith("generate_content ")]
            return spans if len(calls) >= expected and all(descends_from(c, simulation, spans) for c in calls) \
                else None

        try:
            spans = traced.wait_for(chained)
        except AssertionError:
            spans = traced.trace(trace)  # the assertions below say what is missing
        llm_calls = [s for s in spans if s.name.startswith("generate_content ")]
        assert len(llm_calls) == expected
        requests = [s for s in spans if s.name == f"A2A {method}"]
        served = [s for s in spans if served_here(s, transport, method)]
        assert len(requests) == len(served) == expected
        for call in llm_calls:
            assert call.trace_id == simulation.trace_id == trace
            assert descends_from(call, simulation, spans)
            assert any(descends_from(call, request, spans) for request in requests)
            assert any(descends_from(call, server, spans) for server in served)
        for server in served:
            assert any(descends_from(server, request, spans) for request in requests)
    assert trajectory_calls(outcome) == golden_calls("airline", TASKS)


def test_adk_mcp_tool_calls_hang_under_the_turn(traced, serve: Serve, tmp_path: Path) -> None:
    """ADK's McpToolset: its tool-call spans descend from the simulation's turn, the MCP server's span of each
    call from ADK's tool call (the `_meta` trace context ADK sends), and tau2 runs the call in its env turn."""
    standin = StandinLLM.serve(serve)
    mcp_port = free_port()
    agent = serve(lambda url: OpenTelemetryMiddleware(adk_app(
        MODEL, url, standin.api_base, {"api_key": "standin-key", "temperature": 0.0},
        mcp_url=f"http://127.0.0.1:{mcp_port}/mcp")))

    outcome = run_a2a(agent.url, tmp_path, task_ids=TASKS, a2a=A2AConfig(
        endpoint=agent.url, retry=FAST, tools="auto", mcp=McpServing(port=mcp_port)))

    assert {s.task_id: s.reward_info.reward for s in outcome.results.simulations} == dict.fromkeys(TASKS, 1.0)
    for run in outcome.results.simulations:
        simulation, spans = simulation_trace(traced, trace_id_of(run.messages))
        golden = [name for name, _ in golden_calls("airline", [run.task_id])[run.task_id]]
        agent_turns = [s for s in spans if s.name.startswith("turn ") and s.attributes["tau2.role"] == "agent"]
        tool_calls = [s for s in spans if s.name.startswith("execute_tool ")]
        adk_tools = [s for s in tool_calls if "tau2.tool.requestor" not in s.attributes]  # the agent's decisions
        tau2_tools = [s for s in tool_calls if "tau2.tool.requestor" in s.attributes]  # tau2's environment ran
        served = [s for s in spans if s.name.startswith("tools/call ")]
        assert sorted(s.attributes["gen_ai.tool.name"] for s in tau2_tools) == sorted(golden)
        assert sorted(s.name.removeprefix("execute_tool ") for s in adk_tools) == sorted(golden)
        assert len(served) == len(golden)
        for tool in adk_tools:
            assert any(descends_from(tool, turn, spans) for turn in agent_turns)
        for call in served:
            assert any(descends_from(call, tool, spans) for tool in adk_tools)
        llm_calls = [s for s in spans if s.name.startswith("generate_content ")]
        assert llm_calls and all(descends_from(call, simulation, spans) for call in llm_calls)
