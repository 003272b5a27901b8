"""The limits one agent meets, so that at worst it fails its own simulations: each ends the simulation,
in words that name the limit and its flag.

Every tool call the agent asks for runs in tau2's environment, its result is
kept in the trajectory and sent back to the agent: an agent asking for
thousands of calls per reply would take the run's memory and disk. The reply
size (`--a2a-max-reply-bytes`) and its time (`--a2a-timeout`) are enforced
where replies are read (transport.py). What the agent sends in a whole
simulation (MCP requests of every kind, and bytes) has a budget of its own
(`SimulationBudget`), in every tools mode.
"""

from __future__ import annotations

import threading

from tau2_a2a.client.config import A2AConfig
from tau2_a2a.client.errors import AgentOverLimit


def check_tool_calls(config: A2AConfig, in_reply: int, before: int) -> None:
    """Raise AgentOverLimit when a reply asking for `in_reply` tool calls, after `before` in its simulation,
    goes past --a2a-max-tool-calls-per-reply or --a2a-max-tool-calls."""
    if in_reply > config.max_tool_calls_per_reply:
        raise AgentOverLimit(
            f"the agent at {config.endpoint} asked for {in_reply} tool calls in one reply, over the limit of "
            f"{config.max_tool_calls_per_reply} (--a2a-max-tool-calls-per-reply); none of them ran and its "
            "simulation ends here. Raise --a2a-max-tool-calls-per-reply if the agent really needs more.")
    if before + in_reply > config.max_tool_calls:
        raise AgentOverLimit(
            f"the agent at {config.endpoint} asked for {before + in_reply} tool calls in one simulation, over "
            f"the limit of {config.max_tool_calls} (--a2a-max-tool-calls); the last reply's calls did not run and "
            "its simulation ends here. Raise --a2a-max-tool-calls if the agent really needs more.")


def request_over_limit(doing: str, size: int, max_bytes: int) -> AgentOverLimit:
    """A request to the agent over --a2a-max-request-bytes, refused before it is sent."""
    return AgentOverLimit(
        f"{doing} would send {size} bytes, over the limit of {max_bytes} (--a2a-max-request-bytes); it was not "
        "sent and its simulation ends here. The tool results going back to the agent make up most of a request: "
        "raise --a2a-max-request-bytes if the agent really needs this much.")


class SimulationBudget:
    """What the agent sent in one simulation, against --a2a-max-mcp-requests (MCP requests of every kind) and
    --a2a-max-agent-bytes (the bytes of its replies, messages and MCP requests, tool arguments among them: the
    trajectory keeps them). Spent from the MCP server's event loop and the simulation's thread alike.

    The first spend past a budget returns its AgentOverLimit, which ends the simulation; `over` keeps it, and
    whatever the agent sends after it is refused unkept."""

    def __init__(self, config: A2AConfig) -> None:
        self._config = config
        self._lock = threading.Lock()
        self.mcp_requests = 0
        self.sent_bytes = 0
        self.over: AgentOverLimit | None = None

    def spend_request(self) -> AgentOverLimit | None:
        """One more MCP request: its AgentOverLimit the first time that is past the budget, else None."""
        with self._lock:
            self.mcp_requests += 1
            if self.over is not None or self.mcp_requests <= self._config.max_mcp_requests:
                return None
            self.over = AgentOverLimit(
                f"the agent at {self._config.endpoint} sent {self.mcp_requests} MCP requests in one simulation, over "
                f"the limit of {self._config.max_mcp_requests} (--a2a-max-mcp-requests, every kind counts: "
                "initialize, tools/list, tools/call...); its simulation ends here. Raise --a2a-max-mcp-requests if "
                "the agent really needs more.")
            return self.over

    def spend_bytes(self, size: int, what: str) -> AgentOverLimit | None:
        """`size` more bytes the agent sent (`what`: "MCP requests", "replies"): its AgentOverLimit the first time
        that is past the budget, else None."""
        with self._lock:
            self.sent_bytes += size
            if self.over is not None or self.sent_bytes <= self._config.max_agent_bytes:
                return None
            self.over = AgentOverLimit(
                f"the agent at {self._config.endpoint} sent {self.sent_bytes} bytes in one simulation (its "
                f"replies, messages and MCP requests; the last were {what}), over the limit of "
                f"{self._config.max_agent_bytes} (--a2a-max-agent-bytes); its simulation ends here. Raise "
                "--a2a-max-agent-bytes if the agent really needs more.")
            return self.over
