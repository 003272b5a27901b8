"""A Google ADK LlmAgent with MCP tools, as an ADK app: `adk api_server --a2a examples` (or `adk web --a2a examples`).

ADK's own McpToolset calls the domain's tools on the MCP server that
`tau2-a2a run --a2a-tools mcp` serves, and ADK runs its own tool loop; its A2A
reply is its message to the customer. McpToolset takes its URL when the agent
is built, so the run serves its tools at a port named beforehand
(`--a2a-mcp-port`). Two ways (docs/mcp-frameworks.md):

- per-conversation tokens (the default): each conversation's first message
  names its bearer token; a `before_agent_callback` keeps it in the ADK
  session's state and McpToolset's `header_provider` sends it with every MCP
  request of that conversation. Any concurrency.
- one fixed URL (TAU2_MCP_FIXED=1): an unmodified agent, for
  `tau2-a2a run --a2a-mcp-fixed` (one simulation at a time).

ADK imports this module with no flags, so everything comes from the environment:
TAU2_MCP_URL (the MCP server, default http://127.0.0.1:8931/mcp), TAU2_MCP_FIXED,
TAU2_ADK_MODEL (a LiteLLM model name, default gpt-4.1), TAU2_ADK_API_BASE (an
OpenAI-compatible endpoint, optional), and the key from LiteLLM's own variables
(OPENAI_API_KEY, ...). The A2A endpoint is /a2a/adk_mcp_agent; its card is
agent.json beside this file (it declares the extension `--a2a-tools auto` looks
for): change its URLs if the server is not at 127.0.0.1:8000.

    TAU2_MCP_URL=http://127.0.0.1:8931/mcp adk api_server --a2a --port 8000 examples
    tau2-a2a run airline --agent a2a_agent --a2a-endpoint http://127.0.0.1:8000/a2a/adk_mcp_agent \\
        --a2a-tools auto --a2a-mcp-port 8931 --user-llm gpt-4.1 --max-concurrency 4
"""

import os

from tau2_a2a.reference.adk_agent import build_adk_mcp_agent

root_agent = build_adk_mcp_agent(
    os.environ.get("TAU2_ADK_MODEL", "gpt-4.1"),
    os.environ.get("TAU2_MCP_URL", "http://127.0.0.1:8931/mcp"),
    os.environ.get("TAU2_ADK_API_BASE"),
    {"temperature": 0.0},
    fixed=os.environ.get("TAU2_MCP_FIXED", "") not in ("", "0"),
)
