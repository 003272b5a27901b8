"""A request's checks that need no server: the model that prices an agent's tokens."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_a_caller_names_the_model_that_prices_an_agents_tokens() -> None:
    """agent_price_model: tokens an agent reports without a cost are priced with it; a model LiteLLM does not
    price is refused in one line; none, and such turns cost "not reported"."""
    from tau2_a2a.client.targets import TargetPolicy
    from tau2_a2a.service.argument_policy import ArgumentRefused
    from tau2_a2a.service.request import RequestPolicy, check_request

    policy = RequestPolicy(targets=TargetPolicy.from_entries(("loopback",)))
    sent = {"domain": "airline", "agent_endpoint": "http://127.0.0.1:9", "task_ids": ["0"]}
    priced = check_request({**sent, "agent_price_model": "gpt-4.1-2025-04-14"}, policy)
    assert priced.run_settings(Path("/tmp/unused"), "results").a2a.price_model == "gpt-4.1-2025-04-14"
    assert check_request(sent, policy).run_settings(Path("/tmp/unused"), "results").a2a.price_model is None
    with pytest.raises(ArgumentRefused) as refused:
        check_request({**sent, "agent_price_model": "no-such-model"}, policy)
    assert str(refused.value).startswith("agent_price_model no-such-model: LiteLLM's local cost map has no price")
