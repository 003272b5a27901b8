"""Calling the evaluation service from Python with the a2a-sdk client: request, reply, result.

    client = await connect("http://127.0.0.1:9200", token=...)
    async for event in client.send_message(SendMessageRequest(message=request_message(
            "run_tau2_evaluation", {"domain": "airline", "agent_endpoint": url, "user": "scripted_user"}))):
        task = event.task
    result_data(task)["result"]["metrics"]["avg_reward"]
"""

from __future__ import annotations

import uuid

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.types import AgentCard, Message, Part, Role, Task

from tau2_a2a.service.wire import JsonObject


def request_message(tool: str | None = None, arguments: JsonObject | None = None, *,
                    text: str | None = None, context_id: str | None = None) -> Message:
    """A structured request (`tool` and `arguments` in a data part), or a text request."""
    parts: list[Part] = []
    if tool is not None:
        parts.append(new_data_part({"tool": tool, "arguments": arguments or {}}))
    if text:
        parts.append(new_text_part(text))
    return Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), context_id=context_id or "", parts=parts)


def _parts(reply: Task | Message) -> list[Part]:
    if isinstance(reply, Message):
        return list(reply.parts)
    parts = [part for artifact in reply.artifacts for part in artifact.parts]
    if not parts and reply.status.HasField("message"):
        parts = list(reply.status.message.parts)
    return parts


def result_data(reply: Task | Message) -> JsonObject | None:
    """The data part of the reply (the task's artifact, or its status message); None when it has none."""
    datas = get_data_parts(_parts(reply))
    return datas[-1] if datas else None


def result_text(reply: Task | Message) -> str:
    return "\n".join(get_text_parts(_parts(reply)))


async def fetch_card(url: str, http: httpx.AsyncClient) -> AgentCard:
    return await A2ACardResolver(http, url.rstrip("/")).get_agent_card()


async def connect(url: str, token: str | None = None, *, streaming: bool = False,
                  timeout: float = 900.0, card: AgentCard | None = None) -> tuple[Client, httpx.AsyncClient]:
    """An a2a-sdk client for the service at `url` and the HTTP client it uses (close both)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(timeout, connect=10.0))
    card = card or await fetch_card(url, http)
    client = ClientFactory(ClientConfig(streaming=streaming, httpx_client=http)).create(card)
    return client, http
