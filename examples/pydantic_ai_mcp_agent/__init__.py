"""A Pydantic AI agent whose tools come over MCP, served by fasta2a (Pydantic AI's A2A server).

An ordinary `pydantic_ai.Agent`: Pydantic AI's own MCP client (`MCPToolset`)
calls the domain's tools on the MCP server `tau2-a2a run --a2a-tools mcp`
serves for each simulation, and Pydantic AI runs its own tool loop. Its A2A
reply is its message to the customer. fasta2a's `FastA2A` serves it (A2A 1.0,
JSON-RPC) with Pydantic AI's own worker (`fasta2a.pydantic_ai.AgentWorker`).

Two ways to find the tools, the two of `tau2-a2a run` (docs/mcp-frameworks.md):

- **Per conversation** (the default): the first message of each conversation
  names its MCP server as an `mcpServers` entry (URL and bearer token). The
  agent's toolset is a function of the run (`@agent.toolset`), so each
  conversation opens its own MCP client from that entry. Any concurrency.
- **One fixed URL** (`--mcp-url`): the MCP server the agent is configured
  with, for `tau2-a2a run --a2a-mcp-fixed` (one simulation at a time). The
  toolset is still opened per run, not at startup: fasta2a enters the agent,
  and with it every MCP server it holds, when the server starts, and tau2-a2a
  serves the tools only while its run lasts.

Two things fasta2a 2.1 needs here, in `agent.py`: its worker refuses A2A data
parts (the task fails), and tau2-a2a's first message carries two, so the
worker reads a data part as its JSON text (`JsonPartsWorker`); and its agent
card is given the extension that asks `--a2a-tools auto` for MCP tools.

Run it against any OpenAI-compatible endpoint (or a Pydantic AI model name such
as `openai:gpt-4.1`, with its key in the usual variable), then evaluate it:

    python -m examples.pydantic_ai_mcp_agent --model gpt-4.1 --api-base https://api.openai.com/v1 --port 9100
    tau2-a2a run airline --agent a2a_agent --a2a-endpoint http://127.0.0.1:9100 --a2a-tools auto \\
        --user-llm gpt-4.1 --max-concurrency 4

    # one fixed URL: the agent is told it at startup, the run serves it
    python -m examples.pydantic_ai_mcp_agent --model gpt-4.1 --api-base https://api.openai.com/v1 --port 9100 \\
        --mcp-url http://127.0.0.1:8931/mcp
    tau2-a2a run airline --agent a2a_agent --a2a-endpoint http://127.0.0.1:9100 --a2a-tools mcp \\
        --a2a-mcp-fixed --a2a-mcp-port 8931 --user-llm gpt-4.1

It needs `pip install 'tau2-a2a[examples]'` (pydantic-ai-slim with its MCP and
OpenAI extras, and fasta2a).
"""
