"""The MCP tools modes: the domain's tools served over MCP to the agent under test, and how it is told.

    tool_server.py       the MCP server (the `mcp` SDK's, Streamable HTTP): one per run and process, each
                         simulation's tools under a token of its own; tool_server_of(session) starts it at the
                         first use and the A2A session closes it
    connection_guard.py  its connection cap and read deadline (uvicorn's h11 protocol, bounded)
    agent_actions.py     the agent's next action, from MCP or its A2A reply, one at a time to tau2
    invitation.py        what the agent is told in its first message: the server's URL, token and mode

Its settings (`McpServing`, the --a2a-mcp-* flags) are part of `client.config.A2AConfig`, and the card's
extension that asks for the tools over MCP is in `protocol.cards`: both are read before any MCP server runs,
and the A2A client (client/) never imports this package. The reference agents' MCP client is
reference/mcp_client.py; tau2's side of a conversation over MCP is tau2bench/participants/mcp_conversation.py.
"""
