"""Who takes part in a simulation, as tau2 sees them.

`a2a_agent` is the agent under test, reached over A2A, with its tools as
messages or over MCP (`mcp_conversation`); `scripted_user` is the user that
says a task's lines in order; `native_oracle` and `oracle_script` are the
agent that performs a task's expected actions, natively and over A2A.
"""
