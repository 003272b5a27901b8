"""Per-request protocol overhead of the client over each A2A binding, against an agent that answers at once.

One run, one oracle process serving JSON-RPC, HTTP+JSON and gRPC. For each
binding and two payloads (a user turn, and the large first message with
policy and tools) it compares our A2A session (a2a-sdk client, metering,
token counting, retries) with a bare request of the same payload over the
same binding:

  JSON-RPC   httpx POST of the JSON-RPC SendMessage body to /
  HTTP+JSON  httpx POST of the SendMessageRequest JSON to /message:send (as a2a-sdk's RestTransport)
  gRPC       A2AServiceStub.SendMessage on a sync channel kept open

Arms run interleaved, one request at a time, so all see the same machine.
Prints mean/p50 per request, the ratio of means and the overhead in ms per
request; beside it, the client process's CPU time per request of each arm
(all its threads), whose difference moves less with the load of a shared
machine than wall time does.

Then one tool call, both ways the agent can get its tools (docs/mcp-tools.md):
in the message mode a tool call costs one A2A round trip (its result out in a
message, the agent's next answer back); in the MCP tools mode one MCP
`tools/call` from the agent's own MCP client (the official `mcp` SDK, a
session kept open) through tau2-a2a's MCP server to the simulation's thread
and back. Neither counts the tool's own run in tau2's environment.

Then, with `--tracing`, the cost of tracing (docs/tracing.md): two client
processes of our A2A session, one with tracing on (OTEL_EXPORTER_OTLP_ENDPOINT
at a real OTLP/HTTP receiver, oteltap, that this process runs; each request
under a turn's span, as in a run) and one with no OTEL_ variable, take turns
sending the same user turn over JSON-RPC. Two processes, because a process
that has set a tracer provider cannot unset it.

    .venv/bin/python bench/request_overhead.py [--requests 200] [--tracing]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import grpc  # noqa: E402
import httpx  # noqa: E402
from _common import oracle_process  # noqa: E402
from a2a.types import Message, Part, Role, SendMessageRequest  # noqa: E402
from a2a.types.a2a_pb2_grpc import A2AServiceStub  # noqa: E402
from google.protobuf.json_format import MessageToDict  # noqa: E402
from tau2.agent.llm_agent import AGENT_INSTRUCTION, SYSTEM_PROMPT  # noqa: E402
from tau2.registry import registry  # noqa: E402

from tau2_a2a.client.bindings import BINDINGS, READABLE  # noqa: E402
from tau2_a2a.client.config import A2AConfig  # noqa: E402
from tau2_a2a.client.session import A2ASession  # noqa: E402
from tau2_a2a.protocol.hosting import free_port  # noqa: E402
from tau2_a2a.protocol.messages import conversation_start, user_turn  # noqa: E402
from tau2_a2a.tau2bench.seam.distribution import mend_import_effects  # noqa: E402  (tau2 imported quietly)

mend_import_effects()  # this process is ours: what importing tau2 did to it is undone (see README)

Send = Callable[[list[Part]], None]


def first_message_parts() -> list[Part]:
    environment = registry.get_env_constructor("airline")()
    system = SYSTEM_PROMPT.format(agent_instruction=AGENT_INSTRUCTION, domain_policy=environment.get_policy())
    schemas = [tool.openai_schema for tool in environment.get_tools()]
    return conversation_start(system, schemas, user_turn("I want to change my flight."), [])


def request_for(parts: list[Part]) -> SendMessageRequest:
    return SendMessageRequest(message=Message(role=Role.ROLE_USER, parts=parts, message_id=str(uuid.uuid4())))


def bare_senders(url: str, http: httpx.Client, channel: grpc.Channel) -> dict[str, Send]:
    """Per binding name, a bare SendMessage of `parts`: no a2a-sdk client, no session."""
    stub = A2AServiceStub(channel)

    def jsonrpc(parts: list[Part]) -> None:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": MessageToDict(request_for(parts))}
        response = http.post(url + "/", json=body)
        response.raise_for_status()
        assert "result" in response.json(), response.text

    def http_json(parts: list[Part]) -> None:
        http.post(url + "/message:send", json=MessageToDict(request_for(parts))).raise_for_status()

    def grpc_send(parts: list[Part]) -> None:
        stub.SendMessage(request_for(parts), metadata=[("a2a-version", "1.0")])

    return {"jsonrpc": jsonrpc, "http-json": http_json, "grpc": grpc_send}


def session_send(session: A2ASession, parts: list[Part]) -> None:
    session.send(parts, None, None, 0)


def timed(send: Send, parts: list[Part]) -> tuple[float, float]:
    """Wall time and this process's CPU time of one request, in ms."""
    started, cpu = time.perf_counter(), time.process_time()
    send(parts)
    return (time.perf_counter() - started) * 1000.0, (time.process_time() - cpu) * 1000.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--tracing", action="store_true", help="also: one request with tracing on against off")
    parser.add_argument("--worker", metavar="URL", help=argparse.SUPPRESS)  # a client process of --tracing
    args = parser.parse_args()
    if args.worker:
        return tracing_worker(args.worker)
    grpc_port = free_port()
    with oracle_process(free_port(), grpc_port=grpc_port) as url, \
            httpx.Client(headers={"A2A-Version": "1.0"}) as http, \
            grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        sessions = {name: A2ASession(A2AConfig(endpoint=url, transport=name)) for name in BINDINGS}
        bare = bare_senders(url, http, channel)
        arms: dict[tuple[str, str], Send] = {}
        for name, session in sessions.items():
            arms[name, "session"] = functools.partial(session_send, session)
            arms[name, "bare"] = bare[name]
        print(f"{args.requests} sequential requests per arm to an agent that answers at once "
              f"({url}, gRPC 127.0.0.1:{grpc_port}); times in ms per request")
        print(f"  {'payload':13s} {'binding':9s} | {'session mean':>12s} {'p50':>7s} | "
              f"{'bare mean':>9s} {'p50':>7s} | {'ratio':>6s} {'overhead':>9s} | "
              f"{'CPU session':>11s} {'bare':>6s} {'overhead':>9s}")
        for label, parts in (("user turn", user_turn("Yes, please.")), ("first message", first_message_parts())):
            samples: dict[tuple[str, str], list[tuple[float, float]]] = {arm: [] for arm in arms}
            for send in arms.values():
                for _ in range(10):  # warm every path
                    timed(send, parts)
            for _ in range(args.requests):  # interleave so all arms see the same machine
                for arm, send in arms.items():
                    samples[arm].append(timed(send, parts))
            for name, session in sessions.items():
                assert session.binding == BINDINGS[name], session.binding
                ours = [wall for wall, _ in samples[name, "session"]]
                raw = [wall for wall, _ in samples[name, "bare"]]
                our_cpu = statistics.mean(cpu for _, cpu in samples[name, "session"])
                raw_cpu = statistics.mean(cpu for _, cpu in samples[name, "bare"])
                print(f"  {label:13s} {READABLE[session.binding]:9s} | "
                      f"{statistics.mean(ours):12.2f} {statistics.median(ours):7.2f} | "
                      f"{statistics.mean(raw):9.2f} {statistics.median(raw):7.2f} | "
                      f"{statistics.mean(ours) / statistics.mean(raw):5.2f}x "
                      f"{statistics.mean(ours) - statistics.mean(raw):+9.2f} | "
                      f"{our_cpu:11.2f} {raw_cpu:6.2f} {our_cpu - raw_cpu:+9.2f}")
        tool_call_costs(sessions["jsonrpc"], args.requests)
        for session in sessions.values():
            session.close()
        if args.tracing:
            tracing_costs(url, args.requests)
    return 0


def tracing_worker(url: str) -> int:
    """A client process of `--tracing`: one request per line read, its wall and CPU ms written back."""
    from tau2_a2a.client import tracing

    tracing.setup()
    parts = user_turn("Yes, please.")
    with A2ASession(A2AConfig(endpoint=url, transport="jsonrpc")) as session:
        for line in sys.stdin:
            if line.strip() != "go":
                break
            with tracing.span("turn 1: agent"):
                wall, cpu = timed(functools.partial(session_send, session), parts)
            print(f"{wall} {cpu}", flush=True)
    tracing.flush()
    return 0


def tracing_costs(url: str, requests: int) -> None:
    """Tracing on against off, one request each in turn, in two client processes (see the module's docstring)."""
    import asyncio
    import os
    import subprocess
    import threading

    from oteltap import OtelTapHttpProtobufReceiver, OtelTapHttpProtobufReceiverSettings

    port = free_port()
    received = [0]
    stop = threading.Event()

    def receive() -> None:
        async def run() -> None:
            receiver = await OtelTapHttpProtobufReceiver(OtelTapHttpProtobufReceiverSettings(http_port=port)).start()

            async def count() -> None:
                async for _ in receiver.stream_traces():
                    received[0] += 1

            counting = asyncio.create_task(count())
            while not stop.is_set():
                await asyncio.sleep(0.1)
            counting.cancel()
            await receiver.stop()

        asyncio.run(run())

    threading.Thread(target=receive, daemon=True).start()
    quiet = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    envs = {"off": quiet, "on": {**quiet, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}}
    workers = {arm: subprocess.Popen([sys.executable, __file__, "--worker", url], env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE) for arm, env in envs.items()}
    samples: dict[str, list[tuple[float, float]]] = {arm: [] for arm in workers}
    try:
        for round_ in range(requests + 10):  # the first 10 warm both up
            for arm, worker in workers.items():
                worker.stdin.write("go\n")
                worker.stdin.flush()
                wall, cpu = map(float, worker.stdout.readline().split())
                if round_ >= 10:
                    samples[arm].append((wall, cpu))
    finally:
        for worker in workers.values():
            worker.stdin.close()
            worker.wait(60)
        stop.set()
    on, off = samples["on"], samples["off"]
    print(f"Tracing, {requests} requests each, interleaved (JSON-RPC SendMessage of a user turn; on: OTLP/HTTP to a "
          f"receiver on loopback, {received[0]} spans received):")
    for arm, values in (("off", off), ("on", on)):
        walls = [w for w, _ in values]
        print(f"  tracing {arm:3s}: mean {statistics.mean(walls):.2f} ms, p50 {statistics.median(walls):.2f} ms, "
              f"CPU {statistics.mean(c for _, c in values):.2f} ms per request")
    print(f"  on - off: {statistics.mean(w for w, _ in on) - statistics.mean(w for w, _ in off):+.2f} ms wall, "
          f"{statistics.mean(c for _, c in on) - statistics.mean(c for _, c in off):+.2f} ms CPU per request; "
          f"ratio {statistics.mean(w for w, _ in on) / statistics.mean(w for w, _ in off):.2f}")


def tool_call_costs(session: A2ASession, requests: int) -> None:
    """One tool call's round trip through a message turn (JSON-RPC) and through MCP, interleaved."""
    import asyncio
    import threading

    from tau2_a2a.client.config import McpServing
    from tau2_a2a.mcp.agent_actions import ActionQueue, ToolCallAction, ToolOutcome
    from tau2_a2a.mcp.tool_server import ToolServer
    from tau2_a2a.protocol.messages import ToolResult, tool_results_turn
    from tau2_a2a.reference.mcp_client import mcp_session

    environment = registry.get_env_constructor("airline")()
    schemas = [tool.openai_schema for tool in environment.get_tools()]
    result = environment.get_response(  # a typical result: one user's details
        __import__("tau2.data_model.message", fromlist=["ToolCall"]).ToolCall(
            id="c", name="get_user_details", arguments={"user_id": "mia_li_3668"})).content
    turn = tool_results_turn([ToolResult(id="c", name="get_user_details", content=result)])
    server = ToolServer(McpServing()).start()
    actions = ActionQueue()
    mcp = server.open(schemas, actions, driven=False)
    server.simulation(mcp).waiting = True
    stop = threading.Event()

    def environment_side() -> None:  # answers each call at once, with the same result
        while not stop.is_set():
            action = actions.take(0.05)
            if isinstance(action, ToolCallAction):
                action.outcome.set_result(ToolOutcome(result))
                actions.answered(action)

    threading.Thread(target=environment_side, daemon=True).start()
    message_ms: list[float] = []
    mcp_ms: list[float] = []

    async def measure() -> None:
        async with mcp_session(mcp) as tools:
            for _ in range(10):
                await tools.call_tool("get_user_details", {"user_id": "mia_li_3668"})
            for _ in range(requests):
                started = time.perf_counter()
                await tools.call_tool("get_user_details", {"user_id": "mia_li_3668"})
                mcp_ms.append((time.perf_counter() - started) * 1000.0)
                message_ms.append(await asyncio.to_thread(lambda: timed(
                    functools.partial(session_send, session), turn)[0]))

    try:
        asyncio.run(measure())
    finally:
        stop.set()
        server.close()
    print(f"One tool call's round trip, {requests} each, interleaved (the tool's own run not counted):")
    print(f"  through a message turn (JSON-RPC SendMessage, result out, next answer in): "
          f"mean {statistics.mean(message_ms):.2f} ms, p50 {statistics.median(message_ms):.2f} ms")
    print(f"  through MCP (tools/call, Streamable HTTP, JSON response):                 "
          f"mean {statistics.mean(mcp_ms):.2f} ms, p50 {statistics.median(mcp_ms):.2f} ms; "
          f"ratio MCP / message {statistics.mean(mcp_ms) / statistics.mean(message_ms):.2f}")


if __name__ == "__main__":
    sys.exit(main())
