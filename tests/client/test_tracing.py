"""Tracing across the A2A boundary, with a real OTLP/HTTP receiver on loopback (oteltap) and real agents.

Every A2A request carries the W3C trace context of its simulation, on every
binding, blocking and streaming; each simulation is a trace of its own whose
id the results file keeps; spans never hold a secret; and with no OTEL_
variable nothing is traced at all.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from starlette.middleware import Middleware

from tau2_a2a.client.config import A2AConfig
from tau2_a2a.client.records import trace_id_of
from tau2_a2a.client.tracing import wanted
from tau2_a2a.compare.html import trajectory
from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, free_port
from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card
from tau2_a2a.runner.run import evaluate
from tau2_a2a.runner.settings import RunSettings
from tau2_a2a.tau2bench.seam.distribution import Results
from testbed.standin_llm import MODEL, StandinLLM
from tests.support.cli import run_cli
from tests.support.middleware import GrpcMetadataLog, HttpExchange, RequireBearer, WireLog
from tests.support.otlp import Span, descends_from
from tests.support.paths import REPO
from tests.support.runs import FAST, run_a2a

TASKS = ["0", "1"]
BINDINGS = {"jsonrpc": "JSONRPC", "http-json": "HTTP+JSON", "grpc": "GRPC"}
TOKEN = "agent-token-7f3c9a1e5d"
USER_KEY = "sk-user-llm-never-traced-4b8e"


def traceparents(value: str) -> tuple[str, str]:
    """(trace id, parent span id) of a W3C traceparent."""
    version, trace, parent, _flags = value.split("-")
    assert version == "00"
    return trace, parent


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
@pytest.mark.parametrize("transport", ["jsonrpc", "http-json", "grpc"])
def test_every_request_carries_its_simulations_trace(traced, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    transport: str, streaming: bool) -> None:
    http: list[HttpExchange] = []
    grpc_calls = GrpcMetadataLog()
    port, grpc_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    card = oracle_card(url, grpc_url=f"127.0.0.1:{grpc_port}")
    card.capabilities.streaming = True
    app = a2a_app(OracleExecutor(), card, middleware=[Middleware(WireLog, exchanges=http)])
    app.state.grpc_interceptors = [grpc_calls]
    with BackgroundServer(app, port=port, grpc_port=grpc_port):
        outcome = run_a2a(url, tmp_path, task_ids=TASKS,
                          a2a=A2AConfig(endpoint=url, retry=FAST, transport=transport, streaming=streaming))

    simulations = outcome.results.simulations
    assert [s.reward_info.reward for s in simulations] == [1.0, 1.0]
    traces = {s.task_id: trace_id_of(s.messages) for s in simulations}
    assert all(re.fullmatch(r"[0-9a-f]{32}", t) for t in traces.values()) and len(set(traces.values())) == 2
    # The results file keeps them where tau2 reads it back, and the report's trajectory view links each.
    saved = Results.model_validate_json(outcome.results_path.read_text())
    assert {s.task_id: trace_id_of(s.messages) for s in saved.simulations} == traces
    monkeypatch.setenv("TAU2_A2A_TRACE_URL", "http://localhost:16686/trace/{trace_id}")
    views = [trajectory("run", s) for s in json.loads(outcome.results_path.read_text())["simulations"]]
    assert {(v["task"], v["trace"], v["trace_url"]) for v in views} == {
        (task, trace, f"http://localhost:16686/trace/{trace}") for task, trace in traces.items()}
    method = "SendStreamingMessage" if streaming else "SendMessage"
    assert {r["method"] for s in outcome.metrics["simulations"] for r in s["requests"]} == {method}
    if transport == "grpc":
        carried = [meta.get("traceparent") for name, meta in grpc_calls.seen if name.endswith(f"/{method}")]
    else:
        carried = [e.headers.get("traceparent") for e in http if e.rpc_method == method]
    turns = sum(len(s["requests"]) for s in outcome.metrics["simulations"])
    assert len(carried) == turns and None not in carried
    # Each request's traceparent names its simulation's trace and, as parent, its own A2A request span.
    by_trace: dict[str, int] = {}
    for value in carried:
        trace, parent = traceparents(value)
        assert trace in traces.values()
        by_trace[trace] = by_trace.get(trace, 0) + 1
        spans = traced.wait_for(lambda spans: [s for s in spans if s.span_id == parent])
        assert spans[0].name == f"A2A {method}" and spans[0].attributes["rpc.method"] == method
    assert sum(by_trace.values()) == turns and len(by_trace) == 2

    for task_id, trace in traces.items():
        spans = traced.wait_for(lambda _: [s for s in traced.trace(trace) if s.name.startswith("simulation")])
        [simulation] = spans
        assert simulation.parent_id == "" and simulation.attributes["tau2.task.id"] == task_id
        assert simulation.attributes["tau2.reward"] == 1.0 and simulation.attributes["tau2.trial"] == 0
        everything = traced.trace(trace)  # the simulation's span ends last, so its trace is all in
        requests = [s for s in everything if s.name == f"A2A {method}"]
        assert requests and all(descends_from(s, simulation, everything) for s in requests)
        assert {s.attributes["a2a.binding"] for s in requests} == {BINDINGS[transport]}
        turns_of = [s for s in everything if s.name.startswith("turn ")]
        assert {"user", "agent"} <= {s.attributes["tau2.role"] for s in turns_of}
        tools = [s for s in everything if s.name.startswith("execute_tool ")]
        golden = [c.name for m in next(s for s in simulations if s.task_id == task_id).messages
                  for c in (getattr(m, "tool_calls", None) or [])]
        assert sorted(s.attributes["gen_ai.tool.name"] for s in tools) == sorted(golden)
        assert all(any(t.span_id == s.parent_id and t.attributes["tau2.role"] == "env" for t in turns_of)
                   for s in tools)


def test_no_secret_reaches_any_span(traced, serve, tmp_path: Path) -> None:
    """Over MCP, with a bearer token for the agent and an API key for the user simulator's LLM: the token, the
    key and every simulation's MCP token are in no exported span (names, attributes, statuses, events)."""
    standin = StandinLLM.serve(serve)
    http: list[HttpExchange] = []
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    app = a2a_app(OracleExecutor(), oracle_card(url, mcp_tools=True),
                  middleware=[Middleware(WireLog, exchanges=http), Middleware(RequireBearer, token=TOKEN)])
    with BackgroundServer(app, port=port):
        outcome = evaluate(RunSettings(
            domain="airline", task_ids=TASKS, agent_llm="a2a-test", agent_llm_args={}, user="user_simulator",
            user_llm=MODEL, user_llm_args={"api_base": standin.api_base, "api_key": USER_KEY, "temperature": 0.0},
            results_dir=str(tmp_path), save_to="run", max_concurrency=2,
            a2a=A2AConfig(endpoint=url, auth_token=TOKEN, retry=FAST, tools="mcp")))
    assert [s.reward_info.reward for s in outcome.results.simulations] == [1.0, 1.0]
    mcp_tokens = set(re.findall(rb"Bearer ([A-Za-z0-9_-]{20,})", b"".join(e.body for e in http)))
    assert len(mcp_tokens) == 2  # one per simulation, named in its first message

    traces = [trace_id_of(s.messages) for s in outcome.results.simulations]
    for trace in traces:  # every simulation's trace is in, through its user simulator's LLM calls
        chats = traced.wait_for(lambda _: [s for s in traced.trace(trace) if s.name.startswith("chat ")
                                           and s.attributes.get("tau2.llm.caller") == "user_simulator"])
        turns = {s.span_id: s for s in traced.trace(trace) if s.name.startswith("turn ")}
        for chat in chats:
            assert turns[chat.parent_id].attributes["tau2.role"] == "user"
            assert chat.attributes["gen_ai.operation.name"] == "chat"
            assert chat.attributes["gen_ai.request.model"] == "standin"
            assert chat.attributes["gen_ai.usage.input_tokens"] > 0
    traced.wait_for(lambda spans: any(s.name.startswith("tools/call ") for s in spans))  # the MCP server's
    exported = [s.raw.SerializeToString() for s in traced.spans]
    assert any(b"get_user_details" in span for span in exported)  # the grep below reads what it should
    for secret in [TOKEN.encode(), USER_KEY.encode(), *mcp_tokens]:
        assert not any(secret in span for span in exported)


OFF_RUN = """
import json, sys
from pathlib import Path
from starlette.middleware import Middleware
from opentelemetry import trace
from tau2_a2a.client import tracing
from tau2_a2a.protocol.hosting import BackgroundServer, free_port
from tau2_a2a.reference.oracle_agent import OracleExecutor
from tests.support.executors import agent_app
from tests.support.middleware import WireLog
from tests.support.runs import run_a2a
from tau2_a2a.client.records import trace_id_of

exchanges = []
port = free_port()
url = f"http://127.0.0.1:{port}"
with BackgroundServer(agent_app(OracleExecutor(), url, [Middleware(WireLog, exchanges=exchanges)]), port=port):
    outcome = run_a2a(url, Path(sys.argv[1]), task_ids=["0"])
print(json.dumps({
    "reward": outcome.results.simulations[0].reward_info.reward,
    "tracing": tracing.enabled(),
    "provider": type(trace.get_tracer_provider()).__name__,
    "sdk_imported": "opentelemetry.sdk.trace" in sys.modules,
    "trace_headers": [h for e in exchanges for h in e.headers if h in ("traceparent", "tracestate")],
    "trace_id": trace_id_of(outcome.results.simulations[0].messages),
    "results_mention_trace": "trace_id" in outcome.results_path.read_text(),
}))
"""


def test_off_means_off(tmp_path: Path) -> None:
    """With no OTEL_ variable: no provider is set, so no span can be made or exported; no request carries trace
    context; the results file names no trace."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = f"{REPO / 'src'}:{REPO}"
    done = subprocess.run([sys.executable, "-c", OFF_RUN, str(tmp_path)], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"reward": 1.0, "tracing": False, "provider": "ProxyTracerProvider", "sdk_imported": False,
                    "trace_headers": [], "trace_id": None, "results_mention_trace": False}


def test_which_variables_turn_tracing_on() -> None:
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    assert not wanted({}) and not wanted({"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"})
    assert wanted(endpoint) and wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"})
    assert wanted({"OTEL_TRACES_EXPORTER": "console"})
    assert not wanted({**endpoint, "OTEL_TRACES_EXPORTER": "none"})
    assert not wanted({**endpoint, "OTEL_SDK_DISABLED": "TRUE"})


def test_an_exporter_it_cannot_make_stops_the_run_in_one_line(oracle_url: str, tmp_path: Path) -> None:
    process = run_cli(["run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", oracle_url, "--user",
                       "scripted_user", "--num-tasks", "1", "--results-dir", str(tmp_path)],
                      env={"OTEL_TRACES_EXPORTER": "zipkin"})
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 2
    assert stderr.strip().splitlines()[-1] == ("error: OTEL_TRACES_EXPORTER='zipkin' is not an exporter tau2-a2a "
                                               "makes: use otlp or console (or set up your own TracerProvider "
                                               "before the run).")
    assert "Traceback" not in stderr and not list(tmp_path.glob("*.json"))


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
def test_an_agent_served_over_grpc_continues_the_trace_its_call_carries(traced, tmp_path: Path,
                                                                         streaming: bool) -> None:
    """gRPC's side of ContinueTrace (what `tau2-a2a agent` and the service install when tracing is on): the
    agent's span of each call hangs under the client's A2A request span, in the simulation's trace."""
    from tau2_a2a.client.tracing import grpc_continue_trace

    port, grpc_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    card = oracle_card(url, grpc_url=f"127.0.0.1:{grpc_port}")
    card.capabilities.streaming = True
    app = a2a_app(OracleExecutor(), card)
    app.state.grpc_interceptors = [grpc_continue_trace()]
    with BackgroundServer(app, port=port, grpc_port=grpc_port):
        outcome = run_a2a(url, tmp_path, task_ids=TASKS[:1],
                          a2a=A2AConfig(endpoint=url, retry=FAST, transport="grpc", streaming=streaming))

    [simulation] = outcome.results.simulations
    assert simulation.reward_info.reward == 1.0
    method = "SendStreamingMessage" if streaming else "SendMessage"
    trace = trace_id_of(simulation.messages)
    requests = traced.wait_for(lambda _: [s for s in traced.trace(trace) if s.name == f"A2A {method}"])
    def grpc_spans(_: object) -> list[object] | None:
        found = [s for s in traced.trace(trace) if s.name.startswith("gRPC ") and s.name.endswith(f"/{method}")]
        return found if len(found) >= len(requests) else None

    served = traced.wait_for(grpc_spans)
    by_id = {s.span_id: s for s in requests}
    assert len(served) == len(requests) and all(by_id[s.parent_id].name == f"A2A {method}" for s in served)
    assert {s.attributes["rpc.method"] for s in served} == {method}



@pytest.mark.parametrize("transport", ["jsonrpc", "grpc"])
def test_the_card_fetch_and_access_check_are_in_the_runs_trace(traced, tmp_path: Path, transport: str) -> None:
    """The requests made before any simulation (the card fetch, the access check) are spans of the run's trace,
    under its span; the card's GET carries that trace to the agent, so the agent's own span of it joins the run's
    trace instead of starting one of its own."""
    http: list[HttpExchange] = []
    port, grpc_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    app = a2a_app(OracleExecutor(), oracle_card(url, grpc_url=f"127.0.0.1:{grpc_port}"),
                  middleware=[Middleware(WireLog, exchanges=http)])
    with BackgroundServer(app, port=port, grpc_port=grpc_port):
        run_a2a(url, tmp_path, task_ids=["0"], a2a=A2AConfig(endpoint=url, retry=FAST, transport=transport))
    [run] = traced.wait_for(lambda spans: [s for s in spans if s.name == "tau2-a2a run airline"
                                           and s.attributes.get("server.port") == port])

    def before_simulations(spans: list[Span]) -> list[Span]:
        return [s for s in spans if s.attributes.get("server.port") == port and "a2a.turn" not in s.attributes
                and s.name in ("A2A GetAgentCard", "A2A GetTask")]

    discovery = traced.wait_for(lambda spans: len(before_simulations(spans)) == 2 and before_simulations(spans))
    assert sorted(s.name for s in discovery) == ["A2A GetAgentCard", "A2A GetTask"]
    everything = traced.trace(run.trace_id)
    assert all(s.trace_id == run.trace_id and descends_from(s, run, everything) for s in discovery)
    [card_span] = [s for s in discovery if s.name == "A2A GetAgentCard"]
    [card_get] = [e for e in http if e.method == "GET" and e.path.endswith("agent-card.json")]
    assert traceparents(card_get.headers["traceparent"]) == (run.trace_id, card_span.span_id)
