"""One turn's LLM usage and cost as tau2 keeps them on the agent's message (`usage`, `cost`).

What the agent reported (see `protocol.usage`), priced when it gave tokens but
no cost (see `pricing`). An agent that reports nothing leaves both unknown:
`usage` None and `cost` None, never 0; tau2 then records the simulation's
`agent_cost` as None, which its metrics and `tau2 submit` read as "no cost".

Usage known in part (`partial`: some of the turn's LLM calls reported none the
client could read) is recorded with `"partial": true`, its tokens a lower
bound; its cost is unknown (None), the priced lower bound kept in the usage as
`cost_at_least`, so no total made of it looks whole.
"""

from __future__ import annotations

from a2a.types import Message, Task

from tau2_a2a.client.pricing import turn_cost
from tau2_a2a.protocol.usage import reported_usage

# The keys of tau2's `usage` dict: tau2's own two, then what the report adds.
PROMPT_TOKENS = "prompt_tokens"
COMPLETION_TOKENS = "completion_tokens"


def tau2_usage_and_cost(reply: Message | Task, price_model: str | None = None) -> tuple[dict[str, object] | None,
                                                                                         float | None]:
    """tau2's `usage` and `cost` for the agent's reply: (None, None) when it reported no usage."""
    usage = reported_usage(reply)
    if usage is None:
        return None, None
    cost, priced_with = turn_cost(usage, price_model)
    record: dict[str, object] = {
        PROMPT_TOKENS: usage.input_tokens,
        COMPLETION_TOKENS: usage.output_tokens,
        "cached_prompt_tokens": usage.cached_input_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "llm_calls": usage.llm_calls,
        "reported_as": usage.source,
    }
    if usage.model:
        record["model"] = usage.model
    if priced_with:
        record["priced_with"] = priced_with
    if usage.partial:
        record["partial"] = True
        if cost is not None:
            record["cost_at_least"] = cost
        return record, None
    return record, cost
