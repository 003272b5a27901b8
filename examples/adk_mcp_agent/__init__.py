"""An ADK LlmAgent whose tools are ADK's own McpToolset, in the layout `adk web --a2a` and
`adk api_server --a2a` serve."""

from . import agent  # noqa: F401
