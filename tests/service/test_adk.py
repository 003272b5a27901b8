"""The service through ADK: `adk api_server --a2a` and `adk web --a2a` (real processes), RemoteA2aAgent, the LLM
path."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.types import TaskState
from google.genai import types

from tau2_a2a.protocol.hosting import BackgroundServer, free_port
from tests.support.distributions import DOMAIN_LIST, DOMAINS
from tests.support.service import (
    ServiceStandinLLM,
    ask,
    call_tool,
    result_data,
    result_text,
    served_card,
    start_service,
)


async def test_adk_api_server_layout_evaluates_the_oracle(api_server: str, oracle_url: str) -> None:
    card = served_card(api_server)
    arguments = {"domain": "airline", "agent_endpoint": oracle_url, "user": "scripted_user",
                 "user_llm": "scripted", "num_tasks": 5}
    task = await ask(api_server, "RunTau2Evaluation", arguments, card=card)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, result_text(task)
    metrics = result_data(task)["result"]["metrics"]
    assert metrics["avg_reward"] == 1.0 and metrics["num_simulations"] == 5
    domains = await call_tool(api_server, "list_domains", card=card)
    assert "airline" in {d["domain"] for d in domains["domains"]}


async def test_adk_web_serves_adk_agents_and_answers_a_structured_call(adk_web: tuple[str, str]) -> None:
    """`adk web --a2a`: ADK's web UI, and beside it the service over A2A, answering list_domains."""
    url, endpoint = adk_web
    async with httpx.AsyncClient(timeout=60) as http:
        assert (await http.get(f"{url}/dev-ui/")).status_code == 200  # ADK's web UI: this is `adk web`
    card = served_card(endpoint)
    data = await call_tool(endpoint, "list_domains", card=card)
    assert [d["domain"] for d in data["domains"]] == DOMAINS
    airline = next(d for d in data["domains"] if d["domain"] == "airline")
    assert airline["task_count"] == 50 and "book_reservation" in airline["tools"]


@pytest.fixture(scope="module")
def plain_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundServer]:
    server = start_service(tmp_path_factory.mktemp("remote"))
    yield server
    server.stop()


@pytest.mark.parametrize("use_legacy", [True, False])
async def test_adk_remote_a2a_agent_calls_the_service(plain_service: BackgroundServer, use_legacy: bool) -> None:
    from google.adk.a2a.agent import RemoteA2aAgent
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService

    remote = RemoteA2aAgent(name="tau2_eval_remote", use_legacy=use_legacy,
                            agent_card=f"{plain_service.url}/.well-known/agent-card.json")
    runner = Runner(app_name="caller", agent=remote, session_service=InMemorySessionService())
    session = await runner.session_service.create_session(app_name="caller", user_id="u")
    request = b'<a2a_datapart_json>{"tool": "list_domains", "arguments": {}}</a2a_datapart_json>'
    content = types.Content(role="user", parts=[types.Part(inline_data=types.Blob(mime_type="text/plain",
                                                                                  data=request))])
    events = [e async for e in runner.run_async(user_id="u", session_id=session.id, new_message=content)]
    texts = [p.text for e in events if e.content for p in e.content.parts if p.text]
    assert any(t.startswith(f"{len(DOMAINS)} tau2 domains:") and "- airline: 50 tasks" in t for t in texts), texts
    blobs = [p.inline_data.data for e in events if e.content for p in e.content.parts if p.inline_data]
    domains = json.loads(blobs[-1][len(b"<a2a_datapart_json>"):-len(b"</a2a_datapart_json>")])["domains"]
    assert [d["domain"] for d in domains] == DOMAINS


@pytest.fixture(scope="module")
def llm_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BackgroundServer, ServiceStandinLLM]]:
    standin = ServiceStandinLLM()
    port = free_port()
    with pytest.MonkeyPatch.context() as env, BackgroundServer(standin.app(), port=port):
        env.setenv("OPENAI_API_KEY", "standin-key")  # LiteLLM's openai provider wants one
        server = start_service(tmp_path_factory.mktemp("llm"), model=ServiceStandinLLM.MODEL,
                               model_api_base=f"http://127.0.0.1:{port}/v1")
        try:
            yield server, standin
        finally:
            server.stop()


async def test_text_requests_go_to_the_llm_agent(llm_service: Any) -> None:
    server, standin = llm_service
    task = await ask(server.url, text="Which domains can you evaluate an agent on?")
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert result_text(task) == f"I can evaluate on: {DOMAIN_LIST}"
    offered = {t["function"]["name"] for t in standin.requests[0]["tools"]}
    assert offered == {"list_domains", "run_tau2_evaluation", "get_evaluation", "list_evaluations",
                       "cancel_evaluation"}
    assert [m["role"] for m in standin.requests[-1]["messages"]][-2:] == ["assistant", "tool"]


async def test_an_evaluation_the_llm_starts_is_followed_and_results_are_shown_later(
        llm_service: Any, oracle_url: str) -> None:
    server, standin = llm_service
    task = await ask(server.url, text=f"Evaluate {oracle_url} on airline task 2 please")
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, result_text(task)
    data = result_data(task)
    assert data["status"] == "completed" and data["result"]["metrics"]["avg_reward"] == 1.0
    assert [t["task_id"] for t in data["result"]["tasks"]] == ["2"]

    follow_up = await ask(server.url, text="show me the results", context_id=task.context_id)
    assert follow_up.context_id == task.context_id
    assert result_text(follow_up) == f"Evaluation {data['evaluation_id']} is completed; average reward 1.0."
    system = " ".join(str(m.get("content")) for m in standin.requests[-2]["messages"] if m["role"] == "system")
    assert data["evaluation_id"] in system  # the session (= A2A context) remembered it
