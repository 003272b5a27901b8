"""A deterministic OpenAI-compatible chat server standing in for the LLM provider.

It plays the agent of a tau2 task named by the scripted user's marker
("[tau2-task domain=airline id=N]"): after k tool results it asks for the
task's golden action k, then says the task's communicate_info. Real HTTP on
loopback, so LiteLLM, tau2's llm_agent and the baseline A2A agent all run
unchanged. It records every request body it receives.

By default it calls tools by OpenAI function calling. With `tool_calls_as_text`
it writes them as `{"tool_calls": [...]}` text instead and reads tool results
from user messages: that is how an agent that declares no tools (the ADK
reference agent) asks tau2 for them and gets their results.

It also plays tau2's LLM user simulator (`user_simulator`): a request whose
system prompt holds a task's `<scenario>` gets, as the user's first words, the
task's reason for calling plus its marker (so an oracle agent can play the task),
and `###STOP###` once the agent has spoken again.
"""

from __future__ import annotations

import json
import threading
from functools import lru_cache
from typing import Any, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from tau2_a2a.tau2bench.distribution import STOP

from tau2_a2a.tau2bench.oracle_script import find_marker, find_task, oracle_steps, task_marker

MODEL = "openai/standin"
NO_MARKER = "I can only play tasks named by a [tau2-task domain=... id=...] line."
USER_DOMAINS = ("airline", "retail")  # the domains whose scenarios it recognises as a user


class StandinLLM:
    """The chat completions endpoint and the log of what it was asked."""

    def __init__(self, tool_calls_as_text: bool = False) -> None:
        self.tool_calls_as_text = tool_calls_as_text
        self.requests: list[dict[str, Any]] = []
        self.api_base = ""  # set once served: the URL LiteLLM's `api_base` takes
        self._lock = threading.Lock()

    @classmethod
    def serve(cls, serve: Callable[[Callable[[str], Any]], Any], tool_calls_as_text: bool = False) -> "StandinLLM":
        """Start one on loopback with the tests' `serve` fixture."""
        llm = cls(tool_calls_as_text)
        server = serve(lambda url: llm.app())
        llm.api_base = f"{server.url}/v1"
        return llm

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v1/chat/completions", self.completions, methods=["POST"]),
            Route("/chat/completions", self.completions, methods=["POST"]),
        ])

    async def completions(self, request: Request) -> JSONResponse:
        body = await request.json()
        with self._lock:
            self.requests.append(body)
        message = self.reply(body.get("messages", []))
        prompt_tokens = len(json.dumps([body.get("messages"), body.get("tools")], sort_keys=True)) // 4
        completion_tokens = len(json.dumps(message, sort_keys=True)) // 4
        return JSONResponse({
            "id": f"chatcmpl-standin-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "standin"),
            "choices": [{
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            }],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        })

    def user_requests(self) -> list[dict[str, Any]]:
        """The requests it answered as tau2's user simulator."""
        return [body for body in self.requests if user_scenario_task(body.get("messages", [])) is not None]

    def reply(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """As the user when the system prompt holds a task's scenario, else as the agent."""
        task = user_scenario_task(messages)
        if task is not None:
            return user_reply(messages, *task)
        return self.agent_reply(messages)

    def agent_reply(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The next golden action after as many tool results as seen so far, then the closing text."""
        marker = next((found for m in messages if m.get("role") == "user"
                       for found in [find_marker(content_text(m.get("content")))] if found), None)
        if marker is None:
            return {"role": "assistant", "content": NO_MARKER}
        steps = oracle_steps(*marker)
        if self.tool_calls_as_text:
            done = sum(1 for m in messages if m.get("role") == "user"
                       and content_text(m.get("content")).startswith("Tool result"))
        else:
            done = sum(1 for m in messages if m.get("role") == "tool")
        step = steps[min(done, len(steps) - 1)]
        if step.tool_name is None:
            return {"role": "assistant", "content": step.text}
        call = {"id": f"call_standin_{done}", "name": step.tool_name, "arguments": step.arguments or {}}
        if self.tool_calls_as_text:
            return {"role": "assistant", "content": json.dumps({"tool_calls": [call]})}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{
                "id": call["id"],
                "type": "function",
                "function": {"name": step.tool_name, "arguments": json.dumps(call["arguments"])},
            }],
        }


def content_text(content: Any) -> str:
    """A chat message's content as one string: OpenAI content may be a list of text blocks."""
    if isinstance(content, list):
        return "\n".join(block.get("text", "") for block in content if isinstance(block, dict))
    return content or ""


def user_opening(domain: str, task_id: str) -> str:
    """The user simulator's first words for a task: its reason for calling and its marker."""
    scenario = find_task(domain, task_id).user_scenario.instructions
    reason = getattr(scenario, "reason_for_call", None) or str(scenario)
    return f"{reason}\n{task_marker(domain, task_id)}"


def user_reply(messages: list[dict[str, Any]], domain: str, task_id: str) -> dict[str, Any]:
    """tau2 flips roles for its user: the user's own earlier words come back as "assistant"."""
    spoken = any(m.get("role") == "assistant" for m in messages)
    return {"role": "assistant", "content": STOP if spoken else user_opening(domain, task_id)}


def user_scenario_task(messages: list[dict[str, Any]]) -> tuple[str, str] | None:
    """(domain, task id) whose scenario the system prompt holds, if it is a user simulator's prompt."""
    system = " ".join(content_text(m.get("content")) for m in messages if m.get("role") == "system")
    if "<scenario>" not in system:
        return None
    found = [(len(text), key) for key, text in scenarios().items() if text in system]
    return max(found)[1] if found else None


@lru_cache(maxsize=1)
def scenarios() -> dict[tuple[str, str], str]:
    """Every recognised task's scenario as tau2 writes it into the user simulator's prompt."""
    from tau2_a2a.tau2bench.distribution import load_tasks

    return {(domain, task.id): str(task.user_scenario) for domain in USER_DOMAINS for task in load_tasks(domain)}
