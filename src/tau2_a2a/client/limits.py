"""The limits one agent meets, so that at worst it fails its own simulations: each ends the simulation,
in words that name the limit and its flag.

Every tool call the agent asks for runs in tau2's environment, its result is
kept in the trajectory and sent back to the agent: an agent asking for
thousands of calls per reply would take the run's memory and disk. The reply
size (`--a2a-max-reply-bytes`) and its time (`--a2a-timeout`) are enforced
where replies are read (transport.py).
"""

from __future__ import annotations

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
