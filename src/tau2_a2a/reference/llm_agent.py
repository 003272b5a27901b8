"""The baseline LLM agent: tau2's native `llm_agent`, served over A2A.

Copy this file to make your own agent tau2-ready. The tau2 client sends
(see `tau2_a2a.protocol.messages`, decoded here by `read_turn`):
- first message of a context: tau2's system prompt (instructions and policy),
  the tool schemas, the conversation so far (tau2's greeting), the user's words;
- later messages: the user's words, or the results of the tools it called.
It answers with a data part {"tool_calls": [...]}, text for the user, or both,
and reports what the turn cost (its LLM calls' tokens, USD cost and model) with
the usage extension (`tau2_a2a.protocol.usage`, docs/protocol.md), which its
card declares.
Each call's arguments go as the JSON text the model wrote them in: a data
part's object carries every number as a double, and tau2 hashes the database
with the type a tool stored, so 2 and 2.0 must reach it as the model wrote them.

In the MCP tools modes the first message names an MCP server instead of the
tools (`mcp.invitation`): the agent lists the tools there and calls them
with the official MCP client in its own loop, and answers with its words for
the user. In the agent-driven mode its words go to the user through the
`send_message_to_user` tool, whose result is the user's reply. Either way the
model sees the conversation tau2's native `llm_agent` would show it.

The LiteLLM request is the one tau2's `LLMAgent` makes: the same system
prompt, tool schemas, message shapes and `tool_choice="auto"`. So with the
same model the two agents differ only by the protocol.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from a2a.helpers import new_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types import AgentCard, AgentSkill, Part
from a2a.utils.errors import InternalError, InvalidParamsError

from tau2_a2a.litellm_cost_map import import_litellm
from tau2_a2a.mcp.invitation import (
    CONVERSATION_ENDED,
    SEND_TO_USER,
    McpInvitation,
    read_mcp_invitation,
)
from tau2_a2a.protocol.cards import declare_mcp_tools
from tau2_a2a.protocol.hosting import agent_card
from tau2_a2a.protocol.messages import IncomingTurn, read_turn, sent_message, tool_calls_reply
from tau2_a2a.protocol.toolcalls import ToolCallRequest
from tau2_a2a.protocol.usage import USAGE_EXTENSION_URI, ReportedUsage, usage_extension
from tau2_a2a.reference.mcp_client import call, mcp_session, openai_schemas

if TYPE_CHECKING:
    from litellm import ModelResponse

litellm = import_litellm()  # now, with its bundled cost map, not on the first request

NEEDS_MCP = "This agent takes its tools over MCP: evaluate it with --a2a-tools mcp or auto."

log = logging.getLogger("tau2_a2a.llm_agent")

DEFAULT_IDLE_TIMEOUT_SECONDS = 3600.0
DEFAULT_NUM_RETRIES = 3  # tau2's default --max-retries


@dataclass
class Usage:
    """LLM calls, tokens and cost (USD; None, unknown, when LiteLLM has no price for a call's model)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float | None = 0.0
    model: str | None = None

    def add(self, other: Usage) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_prompt_tokens += other.cached_prompt_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.cost = None if self.cost is None or other.cost is None else self.cost + other.cost
        self.model = other.model or self.model

    def reported(self) -> ReportedUsage:
        """This turn's usage as the usage extension carries it."""
        return ReportedUsage(input_tokens=self.prompt_tokens, output_tokens=self.completion_tokens,
                             cached_input_tokens=self.cached_prompt_tokens, reasoning_tokens=self.reasoning_tokens,
                             cost_usd=self.cost, model=self.model, llm_calls=self.calls)


@dataclass
class Conversation:
    """One A2A context: the chat so far, as tau2's LLMAgent would send it."""

    messages: list[dict[str, object]]  # as LiteLLM takes them; never read back
    tools: list[dict[str, Any]]
    last_used: float
    seed: int | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    mcp: McpInvitation | None = None  # in an MCP tools mode: the server its tools are on


class LLMExecutor(AgentExecutor):
    """Answers each turn with one LiteLLM completion; one conversation per context_id.

    Conversations idle for more than `idle_timeout` seconds are forgotten, so a
    long-running server keeps only the contexts in use.
    """

    def __init__(
        self,
        model: str,
        llm_args: dict[str, Any] | None = None,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        mcp_only: bool = False,
    ) -> None:
        self.mcp_only = mcp_only
        self.model = model
        self.llm_args = dict(llm_args or {})
        self.idle_timeout = idle_timeout
        self.clock = clock
        self.conversations: dict[str, Conversation] = {}
        self.usage = Usage()  # totals over every conversation this executor served

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self._forget_idle()
        message, context_id = sent_message(context)
        turn = read_turn(message)
        conversation = self._conversation(context_id, turn, read_mcp_invitation(message))
        if conversation.mcp is None and self.mcp_only:
            await event_queue.enqueue_event(new_message([new_text_part(NEEDS_MCP)], context_id=context_id))
            return
        async with conversation.lock:  # a failed turn leaves the conversation as it was
            incoming = _incoming_messages(turn)
            if conversation.mcp is not None:
                calls: list[ToolCallRequest] = []
                content, messages, usage = await self._over_mcp(conversation, conversation.messages + incoming)
                conversation.messages = messages
            else:
                content, calls, usage = await self._complete(
                    conversation.messages + incoming, conversation.tools, conversation.seed
                )
                conversation.messages += [*incoming, _assistant_message(content, calls)]
            conversation.last_used = self.clock()
        self.usage.add(usage)
        parts: list[Part] = [new_text_part(content)] if content else []
        if calls:
            parts += tool_calls_reply(calls, arguments_as_text=True)  # 2 and 2.0 reach tau2 as the model wrote them
        reply = new_message(parts, context_id=context_id)
        reply.metadata.update({USAGE_EXTENSION_URI: usage.reported().as_extension()})
        await event_queue.enqueue_event(reply)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.conversations.pop(context.context_id or "", None)

    async def _over_mcp(self, conversation: Conversation,
                        messages: list[dict[str, object]]) -> tuple[str | None, list[dict[str, object]], Usage]:
        """One turn in an MCP tools mode: the model's calls run over MCP until it has words for the user (in the
        agent-driven mode, until the user ends the conversation); the turn's words, messages and usage."""
        invitation = conversation.mcp
        assert invitation is not None
        usage = Usage()
        async with mcp_session(invitation.server) as tools:
            if not conversation.tools:  # the model sees the domain's tools, as tau2's own agent's model does
                listed = (await tools.list_tools()).tools
                conversation.tools = [t for t in openai_schemas(listed) if t["function"]["name"] != SEND_TO_USER]
            while True:
                content, calls, used = await self._complete(messages, conversation.tools, conversation.seed)
                usage.add(used)
                messages = [*messages, _assistant_message(content, calls)]
                for request in calls:
                    text, _ = await call(tools, request.name, request.arguments)
                    messages.append({"role": "tool", "content": text, "tool_call_id": request.id})
                if calls:
                    continue
                if not invitation.driven:
                    return content, messages, usage
                answer, _ = await call(tools, SEND_TO_USER, {"message": content or ""})
                if answer == CONVERSATION_ENDED:
                    return "Goodbye.", messages, usage
                messages.append({"role": "user", "content": answer})

    def _conversation(self, context_id: str, turn: IncomingTurn,
                      invitation: McpInvitation | None = None) -> Conversation:
        """Start a conversation on a first message (it carries the system prompt); else continue one."""
        if turn.system is not None:
            history = [_history_message(entry) for entry in turn.history or []]
            conversation = Conversation(
                messages=[{"role": "system", "content": turn.system}, *history],
                tools=turn.tools or [],
                last_used=self.clock(),
                seed=turn.seed,
                mcp=invitation,
            )
            self.conversations[context_id] = conversation
            return conversation
        known = self.conversations.get(context_id)
        if known is None:
            raise InvalidParamsError(
                message=f"Unknown or expired context {context_id!r}: a conversation starts with a message "
                f"carrying the system prompt and tools (idle contexts are forgotten after "
                f"{self.idle_timeout:g} s)."
            )
        return known

    def _forget_idle(self) -> None:
        now = self.clock()
        for context_id, conversation in list(self.conversations.items()):
            if now - conversation.last_used > self.idle_timeout and not conversation.lock.locked():
                del self.conversations[context_id]

    async def _complete(
        self, messages: list[dict[str, object]], tools: list[dict[str, Any]], seed: int | None
    ) -> tuple[str | None, list[ToolCallRequest], Usage]:
        """The model's next turn, asked for as tau2's `generate` asks: an empty reply is asked again."""
        usage = Usage()
        llm_args = {**self.llm_args, "seed": seed} if seed is not None else self.llm_args
        retries = int(self.llm_args.get("num_retries", DEFAULT_NUM_RETRIES))
        attempt = 0
        while True:
            try:
                response = await litellm.acompletion(
                    model=self.model,
                    messages=messages,
                    tools=tools or None,
                    tool_choice="auto" if tools else None,
                    drop_params=True,
                    **llm_args,
                )
            except Exception as error:
                message = _redact(f"LLM call to {self.model} failed: {type(error).__name__}: {error}", self.llm_args)
                log.error("%s", message)
                raise InternalError(message=message[:500]) from None
            usage.add(_usage(response))
            choice = response.choices[0].message
            calls = [
                ToolCallRequest(name=call.function.name, arguments=json.loads(call.function.arguments or "{}"),
                                id=call.id)
                for call in choice.tool_calls or []
            ]
            if (choice.content or "").strip() or calls or attempt >= retries:
                return choice.content, calls, usage
            attempt += 1
            log.warning("Empty reply from %s; asking again (%d/%d)", self.model, attempt, retries)


def _usage(response: ModelResponse) -> Usage:
    usage = Usage(calls=1, cost=_cost(response), model=getattr(response, "model", None) or None)
    reported = response.get("usage")
    if reported is not None:
        usage.prompt_tokens = reported.prompt_tokens or 0
        usage.completion_tokens = reported.completion_tokens or 0
        usage.cached_prompt_tokens = getattr(getattr(reported, "prompt_tokens_details", None), "cached_tokens", 0) or 0
        usage.reasoning_tokens = (getattr(getattr(reported, "completion_tokens_details", None), "reasoning_tokens", 0)
                                  or 0)
    return usage


def _incoming_messages(turn: IncomingTurn) -> list[dict[str, object]]:
    """The user's words or the tool results of one turn, as chat messages."""
    messages: list[dict[str, object]] = []
    if turn.user_text is not None:
        messages.append({"role": "user", "content": turn.user_text})
    for result in turn.tool_results:
        messages.append({"role": "tool", "content": result.content, "tool_call_id": result.id})
    return messages


def _assistant_message(content: str | None, calls: list[ToolCallRequest]) -> dict[str, object]:
    """An assistant turn in the shape tau2's `to_litellm_messages` gives it."""
    tool_calls = [
        {"id": c.id, "name": c.name, "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
         "type": "function"}
        for c in calls
    ]
    return {"role": "assistant", "content": content, "tool_calls": tool_calls or None}


def _history_message(entry: dict[str, Any]) -> dict[str, object]:
    """A message of the conversation so far (tau2's greeting, or a task's prior history)."""
    role, content = entry.get("role"), entry.get("content")
    if role == "assistant":
        calls = [ToolCallRequest(name=c["name"], arguments=c.get("arguments") or {}, id=c.get("id"))
                 for c in entry.get("tool_calls") or []]
        return _assistant_message(content, calls)
    if role == "tool":
        return {"role": "tool", "content": content, "tool_call_id": entry.get("id")}
    return {"role": "user", "content": content}


def _cost(response: ModelResponse) -> float | None:
    """LiteLLM's price for the call; None (unknown, not free) for a model its cost map does not price."""
    from tau2_a2a.client.pricing import known_model

    if not known_model(getattr(response, "model", None)):
        return None
    try:
        return float(litellm.completion_cost(completion_response=response))
    except Exception:
        return None


def _redact(text: str, llm_args: Mapping[str, object]) -> str:
    key = llm_args.get("api_key")
    return text.replace(key, "***") if isinstance(key, str) and key else text


def llm_agent_card(url: str, model: str, grpc_url: str | None = None, mcp_tools: bool = False) -> AgentCard:
    """JSON-RPC and HTTP+JSON at `url`, gRPC at `grpc_url` (host:port) when served; blocking or streaming; the
    usage extension declared, and with `mcp_tools` that the agent takes its tools over MCP."""
    card = agent_card(
        name=f"tau2 baseline LLM agent ({model})",
        description=f"tau2's llm_agent over A2A, backed by the LiteLLM model {model}.",
        url=url,
        grpc_url=grpc_url,
        streaming=True,
        extensions=[usage_extension()],
        skills=[
            AgentSkill(
                id="tau2-llm-agent",
                name="tau2 baseline LLM agent",
                description="Follows the policy and tools given in the first message; answers with "
                "tool calls or text, like tau2's llm_agent.",
                tags=["tau2", "baseline"],
            )
        ],
    )
    return declare_mcp_tools(card) if mcp_tools else card
