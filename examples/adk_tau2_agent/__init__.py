"""tau2's ADK reference agent, in the layout `adk web --a2a` and `adk api_server --a2a` serve."""

from . import agent  # noqa: F401
