"""The baseline LLM agent over A2A, backed by a real local OpenAI-compatible stand-in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf.json_format import MessageToDict
from tau2.agent.llm_agent import LLMAgent
from tau2.registry import registry

from tau2_a2a.client.config import A2AConfig, RetryPolicy
from tau2_a2a.client.errors import A2AFailure
from tau2_a2a.client.pricing import price_tokens
from tau2_a2a.client.session import A2ASession
from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, free_port, wait_for_card
from tau2_a2a.protocol.messages import conversation_start, user_turn
from tau2_a2a.protocol.usage import USAGE_EXTENSION_URI
from tau2_a2a.reference.llm_agent import LLMExecutor, llm_agent_card
from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card
from tau2_a2a.runner.outcome import format_summary
from tau2_a2a.tau2bench.run.fidelity import trajectory_differences
from tau2_a2a.tau2bench.run.layout import results_path
from testbed.standin_llm import MODEL, StandinLLM
from tests.support.runs import FAST, Serve, run_a2a

GREETING = {"role": "assistant", "content": "Hi! How can I help you today?"}


@pytest.fixture
def standin(serve) -> StandinLLM:
    return StandinLLM.serve(serve)


def llm_args(standin: StandinLLM) -> dict:
    return {"api_base": standin.api_base, "api_key": "standin-key", "temperature": 0.0}


def airline_prompt_and_tools() -> tuple[str, list[dict]]:
    environment = registry.get_env_constructor("airline")()
    agent = LLMAgent(tools=environment.get_tools(), domain_policy=environment.get_policy(), llm=MODEL)
    return agent.system_prompt, [tool.openai_schema for tool in agent.tools]


def test_baseline_agent_scores_and_sends_tau2_prompt(serve, standin, tmp_path):
    executor = LLMExecutor(MODEL, llm_args(standin))
    agent = serve(lambda url: a2a_app(executor, llm_agent_card(url, MODEL)))

    outcome = run_a2a(agent.url, tmp_path, task_ids=["1", "2", "3"])

    rewards = {s.task_id: s.reward_info.reward for s in outcome.results.simulations}
    assert rewards == {"1": 1.0, "2": 1.0, "3": 1.0}
    system_prompt, tools = airline_prompt_and_tools()
    assert standin.requests, "the agent never called the LLM"
    for body in standin.requests:
        assert body["messages"][0] == {"role": "system", "content": system_prompt}
        assert body["messages"][1]["content"] == GREETING["content"]
        assert body["tools"] == tools
        assert body["tool_choice"] == "auto"
        assert body["temperature"] == 0.0
    # One conversation per context: each call carries the whole conversation so far.
    task_1 = [b["messages"] for b in standin.requests if "id=1]" in b["messages"][2]["content"]]
    assert [len(m) for m in task_1] == list(range(3, 3 + 2 * len(task_1), 2))
    # Tool call ids chosen by the LLM reach tau2 unchanged.
    calls = [c for s in outcome.results.simulations for m in s.messages for c in (getattr(m, "tool_calls", None) or [])]
    assert calls and all(c.id.startswith("call_standin_") for c in calls)
    assert executor.usage.calls == len(standin.requests)
    assert executor.usage.cost is None  # LiteLLM has no price for the stand-in's model: unknown, not free
    assert {s.agent_cost for s in outcome.results.simulations} == {None}
    assert "standin-key" not in outcome.results_path.read_text()


def test_contexts_are_separate_and_idle_ones_forgotten(serve, standin):
    now = [1000.0]
    executor = LLMExecutor(MODEL, llm_args(standin), idle_timeout=60.0, clock=lambda: now[0])
    agent = serve(lambda url: a2a_app(executor, llm_agent_card(url, MODEL)))
    session = A2ASession(A2AConfig(endpoint=agent.url, retry=RetryPolicy(max_attempts=1)))
    system_prompt, tools = airline_prompt_and_tools()

    def start(task_id: str):
        opening = user_turn(f"Hello.\n[tau2-task domain=airline id={task_id}]")
        return session.send(conversation_start(system_prompt, tools, opening, [GREETING]), None, None, 0)

    try:
        first, second = start("0"), start("1")
        assert first.context_id != second.context_id
        assert set(executor.conversations) == {first.context_id, second.context_id}
        assert executor.conversations[first.context_id].messages[2]["content"].endswith("id=0]")

        now[0] += 61.0  # both idle past the limit; a new conversation sweeps them away
        third = start("3")
        assert set(executor.conversations) == {third.context_id}

        with pytest.raises(A2AFailure, match="Unknown or expired context"):
            session.send(user_turn("Are you there?"), first.context_id, None, 1)
    finally:
        session.close()


def test_reply_follows_the_convention(serve, standin):
    """Tool calls come back as a data part with the LLM's ids; text as a text part."""
    executor = LLMExecutor(MODEL, llm_args(standin))
    agent = serve(lambda url: a2a_app(executor, llm_agent_card(url, MODEL)))
    session = A2ASession(A2AConfig(endpoint=agent.url))
    system_prompt, tools = airline_prompt_and_tools()
    try:
        opening = user_turn("Hi.\n[tau2-task domain=airline id=3]")
        exchange = session.send(conversation_start(system_prompt, tools, opening, [GREETING]), None, None, 0)
        data = [MessageToDict(p.data) for p in exchange.reply.parts if p.HasField("data")]
        # the arguments as the model's JSON text: a data part's object would carry every number as a double
        assert data == [{"tool_calls": [{"id": "call_standin_0", "name": "get_reservation_details",
                                         "arguments": '{"reservation_id": "JMO1MG"}'}]}]
        usage = MessageToDict(exchange.reply.metadata)[USAGE_EXTENSION_URI]
        assert usage == {"input_tokens": standin.usages[-1]["prompt_tokens"],
                         "output_tokens": standin.usages[-1]["completion_tokens"], "cached_input_tokens": 0,
                         "reasoning_tokens": 0, "llm_calls": 1, "model": "standin"}  # no cost_usd: no price
    finally:
        session.close()


def test_each_server_reaches_the_llm_after_an_earlier_one_stopped(standin):
    """Each hosted server runs its own event loop; LiteLLM's connections must not outlive the loop that
    opened them (tau2 imports set a process-wide async client whose connections did)."""
    system_prompt, tools = airline_prompt_and_tools()
    opening = user_turn("Hi.\n[tau2-task domain=airline id=3]")
    replies = []
    for _ in range(2):
        port = free_port()
        executor = LLMExecutor(MODEL, llm_args(standin))
        url = f"http://127.0.0.1:{port}"
        with BackgroundServer(a2a_app(executor, llm_agent_card(url, MODEL)), port=port):
            session = A2ASession(A2AConfig(endpoint=url, retry=RetryPolicy(max_attempts=1)))
            try:
                exchange = session.send(conversation_start(system_prompt, tools, opening, [GREETING]), None, None, 0)
            finally:
                session.close()
        replies.append([MessageToDict(p.data) for p in exchange.reply.parts if p.HasField("data")])
    call = {"id": "call_standin_0", "name": "get_reservation_details", "arguments": '{"reservation_id": "JMO1MG"}'}
    assert replies == [[{"tool_calls": [call]}]] * 2


def test_cli_serves_the_agent(standin, tmp_path):
    """`tau2-a2a agent llm` in its own process, evaluated by `tau2-a2a run`."""
    port = free_port()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "STANDIN_KEY": "standin-key"}
    cli = [sys.executable, "-m", "tau2_a2a.cli"]
    server = subprocess.Popen(
        [*cli, "agent", "llm", "--model", MODEL, "--api-base", standin.api_base,
         "--api-key-env", "STANDIN_KEY", "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_card(url, server, timeout=180)
        run = subprocess.run(
            [*cli, "run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", url,
             "--user", "scripted_user", "--task-ids", "1", "--max-concurrency", "1",
             "--save-to", "cli", "--results-dir", str(tmp_path)],
            env=env, capture_output=True, text=True, timeout=180,
        )
        assert run.returncode == 0, run.stderr[-2000:]
        results = json.loads(results_path("cli", tmp_path).read_text())
        assert [s["reward_info"]["reward"] for s in results["simulations"]] == [1.0]
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0]
    assert "standin-key" not in output


def test_llm_failure_reaches_the_client_as_a_clear_error(serve, tmp_path):
    """No LLM at the api_base: the simulation ends with an agent error naming the model; no key leaks."""
    dead = f"http://127.0.0.1:{free_port()}/v1"
    secret = "sk-never-in-results-42"
    executor = LLMExecutor(MODEL, {"api_base": dead, "api_key": secret, "num_retries": 0})
    agent = serve(lambda url: a2a_app(executor, llm_agent_card(url, MODEL)))

    outcome = run_a2a(agent.url, tmp_path, task_ids=["1"],
                      a2a=A2AConfig(endpoint=agent.url, retry=RetryPolicy(max_attempts=1)))

    [simulation] = outcome.results.simulations
    assert simulation.termination_reason.value == "agent_error"
    assert f"LLM call to {MODEL} failed" in simulation.messages[-1].content
    assert secret not in outcome.results_path.read_text()
    assert secret not in outcome.metrics_path.read_text()


@pytest.mark.parametrize("driven", [False, True], ids=["mcp", "agent-driven"])
def test_over_mcp_the_model_sees_what_it_sees_in_the_message_mode(driven, serve, standin, tmp_path):
    """The baseline agent over MCP: the same LLM requests, the same trajectories and scores as with the tools in
    the messages; only how the tools travel differs."""
    agent = serve(lambda url: a2a_app(LLMExecutor(MODEL, llm_args(standin)), llm_agent_card(url, MODEL)))
    tasks = ["1", "2", "3", "7"]

    in_messages = run_a2a(agent.url, tmp_path, task_ids=tasks, save_to="message")
    asked_in_messages = sorted(json.dumps(body, sort_keys=True) for body in standin.requests)
    standin.requests.clear()
    over_mcp = run_a2a(agent.url, tmp_path, task_ids=tasks, save_to="mcp", a2a=A2AConfig(
        endpoint=agent.url, retry=RetryPolicy(backoff_seconds=0.05), tools="mcp", driven=driven))

    assert sorted(json.dumps(body, sort_keys=True) for body in standin.requests) == asked_in_messages
    assert {s.task_id: s.reward_info.reward for s in over_mcp.results.simulations} == dict.fromkeys(tasks, 1.0)
    assert trajectory_differences(in_messages.results, over_mcp.results) == []


PRICED_MODEL = "gpt-4.1-2025-04-14"  # a model LiteLLM's local cost map prices; the stand-in answers for any name


@pytest.fixture(scope="module")
def priced_agent() -> Any:
    """The baseline agent on every binding, its model one LiteLLM prices, the stand-in answering for it."""
    standin = StandinLLM()
    llm_port, port, grpc_port = free_port(), free_port(), free_port()
    with BackgroundServer(standin.app(), port=llm_port):
        standin.api_base = f"http://127.0.0.1:{llm_port}/v1"
        executor = LLMExecutor(PRICED_MODEL, {"api_base": standin.api_base, "api_key": "standin-key",
                                              "temperature": 0.0})
        card = llm_agent_card(f"http://127.0.0.1:{port}", PRICED_MODEL, f"127.0.0.1:{grpc_port}")
        with BackgroundServer(a2a_app(executor, card), port=port, grpc_port=grpc_port) as server:
            yield server, standin


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
@pytest.mark.parametrize("transport", ["jsonrpc", "http-json", "grpc"])
def test_the_reported_usage_is_what_the_llm_used_on_every_binding(priced_agent: Any, tmp_path: Path,
                                                                    transport: str, streaming: bool) -> None:
    """The agent reports each turn's usage with the usage extension (its card says so); the client records the
    stand-in's tokens for that turn exactly, and the cost the agent reported: LiteLLM's price for them."""
    server, standin = priced_agent
    card = httpx.get(f"{server.url}/.well-known/agent-card.json").json()
    [extension] = card["capabilities"]["extensions"]
    assert extension["uri"] == USAGE_EXTENSION_URI and not extension.get("required")
    before = len(standin.usages)

    outcome = run_a2a(server.url, tmp_path, task_ids=["3"],
                      a2a=A2AConfig(endpoint=server.url, transport=transport, streaming=streaming, retry=FAST))

    [simulation] = outcome.results.simulations
    assert simulation.reward_info.reward == 1.0
    used = standin.usages[before:]
    replies = [m for m in simulation.messages if m.role == "assistant" and m.usage is not None]
    assert [(m.usage["prompt_tokens"], m.usage["completion_tokens"]) for m in replies] == [
        (u["prompt_tokens"], u["completion_tokens"]) for u in used]
    assert {(m.usage["reported_as"], m.usage["model"], m.usage["llm_calls"]) for m in replies} == {
        ("extension", PRICED_MODEL, 1)}
    for message, usage in zip(replies, used):
        assert message.cost == pytest.approx(price_tokens(PRICED_MODEL, usage["prompt_tokens"],
                                                          usage["completion_tokens"]), rel=1e-9)
        assert "priced_with" not in message.usage  # the agent's own price
    assert simulation.agent_cost == pytest.approx(sum(m.cost for m in replies), rel=1e-9)
    [metrics] = outcome.metrics["simulations"]
    assert metrics["cost_usd"]["agent"] == pytest.approx(simulation.agent_cost, rel=1e-6)
    assert metrics["cost_usd"]["user"] == 0.0 and metrics["cost_usd"]["judge"] == 0.0
    assert metrics["cost_usd"]["total"] == pytest.approx(simulation.agent_cost, rel=1e-6)
    assert {r["transport"] for r in metrics["requests"]} == {{"jsonrpc": "JSONRPC", "http-json": "HTTP+JSON",
                                                              "grpc": "GRPC"}[transport]}
    assert {r["method"] for r in metrics["requests"]} == {"SendStreamingMessage" if streaming else "SendMessage"}
    # the run's summary names the A2A text's tokens and the LLM's usage apart, the latter equal to the stand-in's
    spent_in, spent_out = sum(u["prompt_tokens"] for u in used), sum(u["completion_tokens"] for u in used)
    assert outcome.metrics["run"]["agent_usage"] == {"input": spent_in, "output": spent_out,
                                                     "replies_with_usage": len(replies), "replies_with_partial_usage": 0,
                                                     "replies": len(replies)}
    summary = format_summary(outcome.metrics).splitlines()
    assert f"  agent's reported LLM usage, tokens: in {spent_in}   out {spent_out}" in summary
    assert any(line.startswith("  A2A message text, tokens: sent ") for line in summary)


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
@pytest.mark.parametrize("driven", [False, True], ids=["mcp", "agent-driven"])
def test_over_mcp_the_agent_costs_what_its_llm_calls_cost(priced_agent: Any, tmp_path: Path, driven: bool,
                                                          streaming: bool) -> None:
    """Over MCP a turn's LLM calls are reported on its reply, and in the agent-driven mode the last reply comes
    once the user has ended the conversation: either way, blocking or streamed, the simulation's agent cost is the
    price of every call the stand-in answered, and its tokens are theirs, whole (the turn's total, not partial)."""
    server, standin = priced_agent
    before = len(standin.usages)

    outcome = run_a2a(server.url, tmp_path, task_ids=["3"],
                      a2a=A2AConfig(endpoint=server.url, retry=FAST, tools="mcp", driven=driven, streaming=streaming))

    [simulation] = outcome.results.simulations
    assert simulation.reward_info.reward == 1.0
    used = standin.usages[before:]
    assert len(used) >= 2
    spent = sum(price_tokens(PRICED_MODEL, u["prompt_tokens"], u["completion_tokens"]) for u in used)
    assert simulation.agent_cost == pytest.approx(spent, rel=1e-9)
    reported = [m.usage for m in simulation.messages if m.role == "assistant" and m.usage is not None]
    assert sum(u["prompt_tokens"] for u in reported) == sum(u["prompt_tokens"] for u in used)
    assert sum(u["completion_tokens"] for u in reported) == sum(u["completion_tokens"] for u in used)
    assert not [u for u in reported if u.get("partial")]
    assert outcome.metrics["run"]["agent_usage"]["replies_with_partial_usage"] == 0
    [metrics] = outcome.metrics["simulations"]
    assert metrics["cost_usd"]["agent"] == pytest.approx(spent, rel=1e-6)


def test_over_mcp_an_agent_that_reports_nothing_costs_not_reported(serve: Serve, tmp_path: Path) -> None:
    """The oracle reports no usage: over MCP and agent-driven its cost is unknown, never the 0 of the messages
    it made by calling tools."""
    agent = serve(lambda url: a2a_app(OracleExecutor(), oracle_card(url, mcp_tools=True)))
    for driven in (False, True):
        outcome = run_a2a(agent.url, tmp_path / str(driven), task_ids=["3"],
                          a2a=A2AConfig(endpoint=agent.url, retry=FAST, tools="mcp", driven=driven))
        [simulation] = outcome.results.simulations
        assert simulation.reward_info.reward == 1.0 and simulation.agent_cost is None, driven
        assert outcome.metrics["simulations"][0]["cost_usd"]["agent"] is None
