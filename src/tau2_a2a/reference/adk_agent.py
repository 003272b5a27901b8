"""A Google ADK agent made tau2-ready: copy this file to evaluate your own ADK agent.

tau2 runs every tool itself, so the agent declares no tools: it reads tau2's
policy and tool list from the first message and asks for tool calls in text,
as `{"tool_calls": [...]}`. That form matters. ADK's LiteLlm turns any
`{"name": ..., "arguments": ...}` object in the model's text into a call of
one of the agent's own tools (an agent with none answers "Tool '...' not
found"); a `{"tool_calls": [...]}` object passes through ADK untouched, and
the tau2-a2a client runs the calls. google-adk's own `to_a2a` serves it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from a2a.types import AgentCard, AgentSkill
from a2a.utils.constants import TransportProtocol
from google.adk.a2a.utils.agent_to_a2a import to_a2a
from google.adk.agents import LlmAgent
from google.adk.models.lite_llm import LiteLlm
from starlette.applications import Starlette

from tau2_a2a.protocol.cards import agent_card

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


def build_adk_agent(model: str, api_base: str | None = None, llm_args: dict[str, Any] | None = None) -> LlmAgent:
    """The agent: any LiteLLM model, no tools of its own (tau2 runs them), tau2's conventions as instruction."""
    return LlmAgent(
        name="tau2_adk_agent",
        description="A tau2-bench customer service agent built with Google ADK.",
        model=LiteLlm(model=model, api_base=api_base, **(llm_args or {})),
        instruction=INSTRUCTION,
    )


def adk_agent_card(url: str, model: str) -> AgentCard:
    """JSON-RPC at `url`, declared for A2A 1.0 and 0.3 so that a2a-sdk 1.x and 0.3 clients both read it."""
    return agent_card(
        name=f"tau2 ADK agent ({model})",
        description=f"A Google ADK LlmAgent backed by the LiteLLM model {model}, served by ADK's to_a2a.",
        url=url,
        streaming=True,
        http_bindings=(TransportProtocol.JSONRPC,),  # all that ADK's to_a2a serves
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


def adk_app(model: str, url: str, api_base: str | None = None, llm_args: dict[str, Any] | None = None) -> Starlette:
    """The agent served by google-adk's `to_a2a` at `url`: JSON-RPC at /, card at /.well-known/agent-card.json.

    Sessions (one per A2A context) live in memory.
    """
    address = urlsplit(url)
    return to_a2a(
        build_adk_agent(model, api_base, llm_args),
        host=address.hostname or "127.0.0.1",
        port=address.port or 80,
        protocol=address.scheme or "http",
        agent_card=adk_agent_card(url, model),
    )
