"""The agent and its A2A app: `build_agent` and `a2a_app` are all there is to copy."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from typing import Any

from fasta2a import FastA2A
from fasta2a.broker import InMemoryBroker
from fasta2a.pydantic_ai import AgentWorker, worker_lifespan
from fasta2a.schema import Message, Skill
from fasta2a.storage import InMemoryStorage
from pydantic_ai import Agent, ModelMessage, ModelRequest, RunContext, UserPromptPart
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

# Declared in the card so that `tau2-a2a run --a2a-tools auto` gives this agent its tools over MCP.
MCP_TOOLS_EXTENSION = "urn:tau2-a2a:extension:mcp-tools:v1"

INSTRUCTION = """\
You are a customer service agent. The first message of a conversation holds your instructions and
the domain policy: follow them. Use your tools whenever the policy or the customer's request needs
them. If you have a tool send_message_to_user, talk to the customer only through it; otherwise your
answer is your message to the customer, in plain text.
"""


def build_agent(model: str, api_base: str | None = None, api_key: str | None = None,
                mcp_url: str | None = None) -> Agent:
    """A Pydantic AI agent whose tools are an MCP server's: the one at `mcp_url`, or else the one each
    conversation's first message names. `model` is a model of the OpenAI-compatible endpoint at `api_base`,
    or without one, a Pydantic AI model name (`openai:gpt-4.1`)."""
    llm: Any = OpenAIChatModel(model, provider=OpenAIProvider(base_url=api_base, api_key=api_key)) \
        if api_base else model
    agent = Agent(llm, instructions=INSTRUCTION, model_settings={"temperature": 0.0})

    @agent.toolset(per_run_step=False)
    def mcp_tools(ctx: RunContext[None]) -> MCPToolset | None:
        """Opened for each run, when the run starts."""
        if mcp_url is not None:
            return MCPToolset(mcp_url)
        server = http_server_named_in(ctx.messages)
        return MCPToolset(server["url"], headers=server.get("headers")) if server else None

    return agent


def http_server_named_in(messages: Sequence[ModelMessage]) -> dict[str, Any] | None:
    """The first HTTP server of an `mcpServers` entry (the shape MCP clients are configured with) that a user
    message of the conversation holds as JSON; None if there is none."""
    for message in messages:
        for part in message.parts if isinstance(message, ModelRequest) else ():
            if not isinstance(part, UserPromptPart) or not isinstance(part.content, str) \
                    or '"mcpServers"' not in part.content:
                continue
            try:
                servers = json.loads(part.content).get("mcpServers")
            except (ValueError, AttributeError):
                continue
            for server in servers.values() if isinstance(servers, dict) else ():
                if isinstance(server, dict) and isinstance(server.get("url"), str):
                    return server
    return None


class JsonPartsWorker(AgentWorker):
    """fasta2a's Pydantic AI worker, reading each A2A data part as its JSON text (its own refuses them)."""

    def build_message_history(self, history: list[Message]) -> list[ModelMessage]:
        as_text = [{**message, "parts": [{"text": json.dumps(part["data"])} if "data" in part else part
                                         for part in message["parts"]]} for message in history]
        return super().build_message_history(as_text)


def a2a_app(agent: Agent, url: str) -> FastA2A:
    """`agent` served by fasta2a at `url`: JSON-RPC at /, card at /.well-known/agent-card.json. What
    `fasta2a.pydantic_ai.agent_to_a2a` builds, with the worker above."""
    storage, broker = InMemoryStorage(), InMemoryBroker()
    worker = JsonPartsWorker(agent=agent, broker=broker, storage=storage)
    return FastA2A(
        storage=storage, broker=broker, url=url,
        name="tau2 Pydantic AI agent",
        description="A Pydantic AI agent whose tools come over MCP, served by fasta2a.",
        skills=[Skill(id="customer-service", name="Customer service", description="Follows the domain policy "
                      "in the first message; calls its tools over MCP.", tags=["tau2", "pydantic-ai", "mcp"],
                      input_modes=["text/plain", "application/json"], output_modes=["text/plain"])],
        extensions=[{"uri": MCP_TOOLS_EXTENSION, "description": "Give this agent its tools over MCP.",
                     "required": False}],
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain"],
        lifespan=partial(worker_lifespan, worker=worker, agent=agent),
    )
