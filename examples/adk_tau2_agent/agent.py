"""tau2's ADK reference agent as an ADK app: `adk api_server --a2a examples` (or `adk web --a2a examples`).

ADK imports this module with no flags, so the model comes from the environment:
TAU2_ADK_MODEL (a LiteLLM model name, default gpt-4.1), TAU2_ADK_API_BASE (an
OpenAI-compatible endpoint, optional), and the key from LiteLLM's own variables
(OPENAI_API_KEY, ...). The A2A endpoint is /a2a/adk_tau2_agent; its card is
agent.json beside this file: change its URLs if the server is not at 127.0.0.1:8000.
"""

import os

from tau2_a2a.reference.adk_agent import build_adk_agent

root_agent = build_adk_agent(
    os.environ.get("TAU2_ADK_MODEL", "gpt-4.1"),
    os.environ.get("TAU2_ADK_API_BASE"),
    {"temperature": 0.0},
)
