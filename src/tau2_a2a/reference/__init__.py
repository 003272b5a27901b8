"""The reference A2A agents: the oracle (golden actions, offline), the baseline LLM agent and ADK agents, and the
MCP client the agents taking their tools over MCP share."""
