"""Helpers for the evaluation-service tests: a service on loopback or as a process, requests, replies."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from a2a.client import ClientCallContext
from a2a.types import AgentCard, GetTaskRequest, Message, SendMessageConfiguration, SendMessageRequest, Task, TaskState

from tau2_a2a.protocol.hosting import BackgroundServer, free_port
from tau2_a2a.service.app import build_app
from tau2_a2a.service.caller import connect, request_message, result_data, result_text
from tau2_a2a.service.jobs.child import start_child
from tau2_a2a.service.jobs.limits import Limits
from tau2_a2a.service.request import EvaluationRequest
from tau2_a2a.service.settings import ServiceSettings
from tests.support.processes import descendants
from tests.support.waiting import until, wait_until

__all__ = [
    "SERVICE_TOKEN",
    "TERMINAL_STATES",
    "Service",
    "ServiceStandinLLM",
    "ask",
    "call_tool",
    "child_given",
    "done_so_far",
    "result_data",
    "result_text",
    "served_card",
    "start_service",
    "stream",
    "until",
    "wait_for_task",
]

SERVICE_TOKEN = "svc-token-3c9d1e"  # the token of the `service_all_bindings` fixture (tests/conftest.py)
CLI = str(Path(sys.executable).parent / "tau2-a2a")
# How long a `tau2-a2a serve` process, or an evaluation's process it starts at nice 10, may take to start: its
# imports (ADK, a2a-sdk's server, tau2) take a minute and more of a busy 2-core machine.
STARTUP_SECONDS = 300

# The agents under test listen on loopback, which the service's default policy (public) refuses.
LOOPBACK_TARGETS = ("public", "loopback")
GOOD = {"domain": "airline", "agent_endpoint": "http://127.0.0.1:9100", "user": "scripted_user"}  # passes every check

TERMINAL_STATES = (TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED,
                   TaskState.TASK_STATE_REJECTED)


def start_service(results_dir: Path, *, limits: Limits | None = None, **settings: Any) -> BackgroundServer:
    """`tau2-a2a serve`'s app on a free loopback port (polling progress every 0.2 s), loopback agents allowed."""
    settings.setdefault("allowed_targets", LOOPBACK_TARGETS)
    # The suite's other workers are no service's: ten nice steps below them, an evaluation's process starves for
    # minutes on a busy machine. Lowering the priority is tested on its own (test_units, test_serve_settings).
    settings.setdefault("evaluation_nice", 0)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    app = build_app(ServiceSettings(results_dir=results_dir, limits=limits or Limits(max_running=4),
                                          **settings), url, poll_seconds=0.2)
    server = BackgroundServer(app, port=port).start()
    server.app = app  # type: ignore[attr-defined]
    return server


# A stand-in interpreter for an evaluation's child: it records what it was given, and exits.
_RECORDER = """#!{python}
import json, os, sys
umask = os.umask(0)
json.dump({{"command": sys.argv, "stdin": sys.stdin.read(), "cwd": os.getcwd(), "umask": umask,
           "token": os.environ.get("TAU2_A2A_AUTH_TOKEN"),
           "service_env": sorted(k for k in os.environ if k.startswith("TAU2_EVAL_"))}}, open("given.json", "w"))
"""


def child_given(directory: Path, request: EvaluationRequest, token: str | None = None,
                **settings: Any) -> dict[str, Any]:
    """What an evaluation's child is given when the service starts it (service/jobs/child.py's start_child):
    its command line ("command", the interpreter first), standard input ("stdin", and "request" read from it
    as JSON), directory, umask, the target's token if its environment had one, and the names of the
    service's TAU2_EVAL_* variables it can see."""
    recorder = directory.parent / f"{directory.name}-recorder"
    recorder.write_text(_RECORDER.format(python=sys.executable))
    recorder.chmod(0o755)
    assert start_child(request, directory, token, python=str(recorder), **settings).wait() == 0
    given = json.loads((directory / "given.json").read_text())
    given["request"] = json.loads(given["stdin"]) if given["stdin"] else None
    return given


async def ask(url: str, tool: str | None = None, arguments: dict[str, Any] | None = None, *,
              text: str | None = None, context_id: str | None = None, token: str | None = None,
              return_immediately: bool = False, card: Any = None) -> Task | Message:
    """One blocking (or return-immediately) send; the Task (or Message) the service answers with."""
    client, http = await connect(url, token, card=card)
    try:
        request = SendMessageRequest(
            message=request_message(tool, arguments, text=text, context_id=context_id),
            configuration=SendMessageConfiguration(return_immediately=return_immediately),
        )
        reply = None
        async for event in client.send_message(request, context=ClientCallContext(timeout=600)):
            reply = event.task if event.HasField("task") else event.message
        assert reply is not None
        return reply
    finally:
        await http.aclose()


async def stream(url: str, tool: str, arguments: dict[str, Any], token: str | None = None) -> list[Any]:
    """Every streamed event of one request, in order."""
    client, http = await connect(url, token, streaming=True)
    try:
        request = SendMessageRequest(message=request_message(tool, arguments))
        return [event async for event in client.send_message(request, context=ClientCallContext(timeout=600))]
    finally:
        await http.aclose()


async def wait_for_task(url: str, task_id: str, token: str | None = None, timeout: float = 240.0) -> Task:
    """Poll GetTask until the task ends."""
    client, http = await connect(url, token)
    try:
        return await until(lambda: client.get_task(GetTaskRequest(id=task_id)),
                           lambda task: task.status.state in TERMINAL_STATES, f"task {task_id} to end", timeout)
    finally:
        await http.aclose()


async def call_tool(url: str, tool: str, arguments: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    """A structured call that must succeed; its data part (of a completed Task, or of the Message a
    read-only call is answered with)."""
    reply = await ask(url, tool, arguments, **kwargs)
    if isinstance(reply, Task):
        assert reply.status.state == TaskState.TASK_STATE_COMPLETED, result_text(reply) or reply.status.message
    return result_data(reply)


class ServiceStandinLLM:
    """A deterministic OpenAI-compatible chat endpoint playing the service's assistant model.

    Real HTTP on loopback, so LiteLLM and ADK's LlmAgent run unchanged. It asks
    for list_domains when the user mentions domains, for run_tau2_evaluation
    when the user says "evaluate <url> ... task <id>", for get_evaluation of the
    evaluation the system instruction names when the user asks for results; after
    a tool result it states what the tool returned. It records every request.
    """

    MODEL = "openai/service-standin"

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        async def completions(request: Any) -> Any:
            body = await request.json()
            self.requests.append(body)
            message = self.reply(body["messages"])
            return JSONResponse({
                "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
                "model": body.get("model", "standin"),
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            })

        return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])

    @staticmethod
    def _text(message: dict[str, Any]) -> str:
        content = message.get("content")
        if isinstance(content, list):
            return " ".join(c.get("text", "") for c in content if isinstance(c, dict))
        return content or ""

    def reply(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        import json
        import re

        last = messages[-1]
        if last["role"] == "tool":
            result = json.loads(self._text(last))
            if "domains" in result:
                return {"role": "assistant",
                        "content": "I can evaluate on: " + ", ".join(d["domain"] for d in result["domains"])}
            if "evaluation_id" in result:
                reward = (result.get("result") or {}).get("metrics", {}).get("avg_reward")
                return {"role": "assistant", "content": f"Evaluation {result['evaluation_id']} is "
                                                        f"{result['status']}; average reward {reward}."}
            return {"role": "assistant", "content": f"The tool said: {result}"}
        text = self._text(last)
        system = " ".join(self._text(m) for m in messages if m["role"] in ("system", "developer"))
        if "domain" in text:
            return self._call("list_domains", {})
        if text.startswith("Evaluate"):
            endpoint = re.search(r"https?://\S+", text).group(0)
            task = re.search(r"task (\d+)", text).group(1)
            return self._call("run_tau2_evaluation", {"domain": "airline", "agent_endpoint": endpoint,
                                                      "user": "scripted_user", "user_llm": "scripted",
                                                      "task_ids": [task]})
        found = re.search(r"ev-[0-9a-f]{12}", system)
        if "result" in text and found:
            return self._call("get_evaluation", {"evaluation_id": found.group(0)})
        return {"role": "assistant", "content": "Ask me about domains or results."}

    def _call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        import json

        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{len(self.requests)}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def assessment_message(request: dict[str, Any], *, as_data: bool = False) -> Any:
    """An AgentBeats assessment request: JSON text in one text part (as the gateway sends it), or a data part."""
    import json
    import uuid

    from a2a.helpers import new_data_part, new_text_part
    from a2a.types import Message, Role

    part = new_data_part(request) if as_data else new_text_part(json.dumps(request))
    return Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[part])


async def stream_message(url: str, message: Any, card: Any = None) -> list[Any]:
    """Every streamed event of one message sent with streaming on, in order."""
    client, http = await connect(url, streaming=True, card=card)
    try:
        request = SendMessageRequest(message=message)
        return [event async for event in client.send_message(request, context=ClientCallContext(timeout=600))]
    finally:
        await http.aclose()


async def final_task(url: str, task_id: str, card: Any = None) -> Task:
    """The task as the service keeps it once its stream ended (GetTask)."""
    client, http = await connect(url, card=card)
    try:
        return await client.get_task(GetTaskRequest(id=task_id))
    finally:
        await http.aclose()


def served_card(endpoint: str) -> AgentCard:
    """The card agent.json gives, pointed at the port this test server listens on."""
    from a2a.client.card_resolver import parse_agent_card

    card = parse_agent_card(httpx.get(f"{endpoint}/.well-known/agent-card.json").json())
    assert card.name == "tau2 evaluation service" and len(card.skills) == 5
    card.supported_interfaces[0].url = endpoint
    return card



class Service:
    """A `tau2-a2a serve` process that can be killed and started again on the same port and directory."""

    def __init__(self, results_dir: Path, *extra: str) -> None:
        self.results_dir = results_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.extra = extra
        self.process: subprocess.Popen | None = None

    def start(self) -> Service:
        log = open(self.results_dir.parent / f"serve-{self.port}.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [CLI, "serve", "--port", str(self.port), "--results-dir", str(self.results_dir),
             "--max-running", "2", "--allowed-targets", "public,loopback", *self.extra],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={"TAU2_EVAL_EVALUATION_NICE": "0", **os.environ, "TAU2_EVAL_LOG_LEVEL": "warning"})  # see start_service
        wait_until(self._card_answers, "the service to start", STARTUP_SECONDS)
        return self

    def _card_answers(self) -> bool:
        assert self.process is not None
        assert self.process.poll() is None, (self.results_dir.parent / f"serve-{self.port}.log").read_text()
        try:
            return httpx.get(f"{self.url}/.well-known/agent-card.json", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self) -> set[int]:
        """SIGKILL the service alone (not its children); the pids of the children it had."""
        assert self.process is not None
        children = descendants(self.process.pid)
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        return children

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def done_so_far(url: str, evaluation_id: str) -> int:
    record = asyncio.run(call_tool(url, "get_evaluation", {"evaluation_id": evaluation_id}))
    return (record.get("progress") or {}).get("simulations_done", 0)
