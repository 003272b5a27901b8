"""Google ADK agents made tau2-ready, two ways: copy what fits your own ADK agent.

Over MCP (`build_adk_mcp_agent`, `--a2a-tools mcp`): an ordinary `LlmAgent` whose
tools are ADK's own `McpToolset`, pointed at the run's MCP tools server. ADK runs
its own tool loop, each call goes to tau2 over MCP, and its answer is its
message to the user. With the server at a fixed URL (`--a2a-mcp-fixed`) the
agent is unmodified; to run several conversations at once, two callbacks of a
few lines keep the token each conversation's first message names and send it
with every MCP request of that conversation (`remember_mcp_headers`,
`mcp_headers`).

In messages (`build_adk_agent`, the message mode): the agent declares no tools:
it reads tau2's policy and tool list from the first message and asks for tool
calls in text, as `{"tool_calls": [...]}`. That form matters. ADK's LiteLlm
turns any `{"name": ..., "arguments": ...}` object in the model's text into a
call of one of the agent's own tools (an agent with none answers "Tool '...'
not found"); a `{"tool_calls": [...]}` object passes through ADK untouched, and
the tau2-a2a client runs the calls.

Either is served by google-adk's own A2A executor (`A2aAgentExecutor`, with the
runner and in-memory services its `to_a2a` builds) on every binding of
`tau2_a2a.protocol.hosting.a2a_app`: JSON-RPC, HTTP+JSON and gRPC. ADK's
`to_a2a` itself serves JSON-RPC only; the executor speaks no binding.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from a2a.types import AgentCard, AgentSkill
from google.adk.a2a.executor.a2a_agent_executor import A2aAgentExecutor
from google.adk.agents import LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.artifacts.in_memory_artifact_service import InMemoryArtifactService
from google.adk.auth.credential_service.in_memory_credential_service import InMemoryCredentialService
from google.adk.memory.in_memory_memory_service import InMemoryMemoryService
from google.adk.models.lite_llm import LiteLlm
from google.adk.runners import Runner
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.tools.mcp_tool import McpToolset, StreamableHTTPConnectionParams
from starlette.applications import Starlette

from tau2_a2a.litellm_cost_map import use_bundled_cost_map
from tau2_a2a.mcp.invitation import invitation_from_entry
from tau2_a2a.protocol.cards import agent_card, declare_mcp_tools
from tau2_a2a.protocol.hosting import a2a_app

INSTRUCTION = """\
You are a customer service agent evaluated by tau2-bench. Its messages are laid out as follows.

The first message of a conversation holds, in order:
- your instructions and the domain policy, inside <instructions> and <policy> tags: follow them;
- the tools you may call, inside <tools> tags, then again as JSON under "tools";
- the conversation so far, as JSON under "history";
- the customer's first words.
Each later message holds either the customer's words, or the results of the tools you called
("Tool result for NAME (call ID): ...", then the same as JSON under "tool_results").
JSON blocks arrive inside <a2a_datapart_json> tags.

You never run tools yourself. To call tools, answer with this JSON and nothing else:
{"tool_calls": [{"name": "TOOL_NAME", "arguments": {"ARGUMENT": "VALUE"}}]}
Several calls may go in the list; you get all results in the next message.
The <tools> section may offer other shapes, such as <json>{"name": ..., "arguments": ...}</json>
or a "respond" tool: do not use them. Here any {"name": ..., "arguments": ...} object in your
answer, even inside tags, is taken for a call of a tool of your own, and you have none.

To talk to the customer, answer in plain text, with no JSON.
Each answer is either tool calls or text for the customer, never both.
"""


MCP_INSTRUCTION = """\
You are a customer service agent. The first message of a conversation holds your instructions and
the domain policy: follow them. Use your tools whenever the policy or the customer's request needs
them. If you have a tool send_message_to_user, talk to the customer only through it; otherwise your
answer is your message to the customer, in plain text.
"""
MCP_HEADERS_KEY = "tau2_mcp_headers"  # in the ADK session's state: the headers that open its tools
# How long McpToolset waits for an MCP session to open. ADK's default, 5 s, is too short for a process that has
# just started: its first model call imports LiteLLM on the event loop for several seconds, the sessions that
# conversations open meanwhile time out, and ADK then runs the agent without its tools (logging an error).
MCP_CONNECT_TIMEOUT_SECONDS = 60.0
_DATA_START, _DATA_END = b"<a2a_datapart_json>", b"</a2a_datapart_json>"


def remember_mcp_headers(callback_context: CallbackContext) -> None:
    """before_agent_callback: keep in the session's state the MCP headers (the bearer token) that the
    conversation's first message names; ADK hands an A2A data part over as a tagged JSON blob."""
    content = callback_context.user_content
    for part in content.parts or [] if content else []:
        data = part.inline_data.data if part.inline_data else None
        if data and data.startswith(_DATA_START) and data.endswith(_DATA_END):
            try:
                entry = json.loads(data[len(_DATA_START):-len(_DATA_END)])
            except ValueError:
                continue
            invitation = invitation_from_entry(entry) if isinstance(entry, dict) else None
            if invitation is not None:
                callback_context.state[MCP_HEADERS_KEY] = invitation.server.headers


def mcp_headers(context: ReadonlyContext) -> dict[str, str]:
    """McpToolset's header_provider: this conversation's MCP headers (see remember_mcp_headers)."""
    return dict(context.state.get(MCP_HEADERS_KEY) or {})


def build_adk_mcp_agent(model: str, mcp_url: str, api_base: str | None = None,
                        llm_args: dict[str, Any] | None = None, fixed: bool = False) -> LlmAgent:
    """An LlmAgent whose tools are ADK's McpToolset on the run's MCP server at `mcp_url`. `fixed`: the server
    serves one conversation at a time at that URL, with no token (unmodified ADK); otherwise each conversation
    sends the token its first message names."""
    connection = StreamableHTTPConnectionParams(url=mcp_url, timeout=MCP_CONNECT_TIMEOUT_SECONDS)
    toolset = McpToolset(connection_params=connection,
                         header_provider=None if fixed else mcp_headers)
    return LlmAgent(
        name="tau2_adk_mcp_agent",
        description="A tau2-bench customer service agent built with Google ADK; its tools come over MCP.",
        model=lite_llm(model, api_base, llm_args),
        instruction=MCP_INSTRUCTION,
        tools=[toolset],
        before_agent_callback=None if fixed else remember_mcp_headers,
    )


def lite_llm(model: str, api_base: str | None, llm_args: dict[str, Any] | None) -> LiteLlm:
    """ADK's LiteLLM model; LiteLLM (imported by ADK when first used) with its bundled cost map."""
    use_bundled_cost_map()
    return LiteLlm(model=model, api_base=api_base, **(llm_args or {}))


def build_adk_agent(model: str, api_base: str | None = None, llm_args: dict[str, Any] | None = None) -> LlmAgent:
    """The agent: any LiteLLM model, no tools of its own (tau2 runs them), tau2's conventions as instruction."""
    return LlmAgent(
        name="tau2_adk_agent",
        description="A tau2-bench customer service agent built with Google ADK.",
        model=lite_llm(model, api_base, llm_args),
        instruction=INSTRUCTION,
    )


def adk_agent_card(url: str, model: str, grpc_url: str | None = None, mcp_tools: bool = False) -> AgentCard:
    """JSON-RPC and HTTP+JSON at `url` (and gRPC at `grpc_url`, host:port), each declared for A2A 1.0 and 0.3 so
    that a2a-sdk 1.x and 0.3 clients both read it; with `mcp_tools`, declaring that the agent takes its tools
    over MCP."""
    card = agent_card(
        name=f"tau2 ADK agent ({model})",
        description=f"A Google ADK LlmAgent backed by the LiteLLM model {model}, run by ADK's A2A executor.",
        url=url,
        streaming=True,
        grpc_url=grpc_url,
        skills=[
            AgentSkill(
                id="tau2-adk-agent",
                name="tau2 ADK agent",
                description="Follows the policy and tools given in the first message; asks for tool calls "
                'as {"tool_calls": [...]} text, talks to the customer in plain text.',
                tags=["tau2", "adk"],
            )
        ],
    )
    return declare_mcp_tools(card) if mcp_tools else card


def adk_runner(agent: LlmAgent) -> Runner:
    """The runner google-adk's `to_a2a` makes for `agent`: its sessions (one per A2A context), artifacts, memory
    and credentials in memory."""
    return Runner(
        app_name=agent.name or "adk_agent",
        agent=agent,
        artifact_service=InMemoryArtifactService(),
        session_service=InMemorySessionService(),
        memory_service=InMemoryMemoryService(),
        credential_service=InMemoryCredentialService(),
    )


def adk_executor(agent: LlmAgent) -> A2aAgentExecutor:
    """google-adk's A2A executor for `agent`, as `to_a2a` makes it: the runner is made at the first request."""
    return A2aAgentExecutor(runner=partial(adk_runner, agent))


def adk_app(model: str, url: str, api_base: str | None = None, llm_args: dict[str, Any] | None = None,
            mcp_url: str | None = None, mcp_fixed: bool = False, grpc_url: str | None = None) -> Starlette:
    """The agent, run by google-adk's A2A executor, served at `url`: JSON-RPC at /, HTTP+JSON below it, the card
    at /.well-known/agent-card.json; gRPC at `grpc_url` (host:port) when given, by
    `tau2_a2a.protocol.hosting.grpc_server` (`BackgroundServer`, `serve_forever`). With `mcp_url`, the agent
    takes its tools over MCP there (`build_adk_mcp_agent`)."""
    agent = (build_adk_mcp_agent(model, mcp_url, api_base, llm_args, mcp_fixed) if mcp_url
             else build_adk_agent(model, api_base, llm_args))
    return a2a_app(adk_executor(agent), adk_agent_card(url, model, grpc_url, mcp_tools=mcp_url is not None))
