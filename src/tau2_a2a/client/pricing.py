"""What reported tokens cost, from LiteLLM's local price table; never a guess.

A cost the agent reported is taken as it is. Tokens without a cost are priced
with the model the agent named, else the model the user named
(`--a2a-price-model`), from LiteLLM's local cost map
(`litellm_cost_map`: nothing is fetched). A model the map does
not know, or no model at all, leaves the cost unknown (None), never 0.
"""

from __future__ import annotations

from tau2_a2a.errors import ConfigError
from tau2_a2a.litellm_cost_map import import_litellm
from tau2_a2a.protocol.usage import ReportedUsage


def known_model(model: str | None) -> bool:
    """Whether LiteLLM's local cost map prices `model` (with or without a provider prefix)."""
    if not model:
        return False
    table = import_litellm().model_cost  # imported only when something is priced
    return model in table or model.split("/", 1)[-1] in table


def price_tokens(model: str | None, input_tokens: int, output_tokens: int,
                 cached_input_tokens: int = 0) -> float | None:
    """USD for these tokens of `model` (input includes the cached tokens), or None when it has no price."""
    if not known_model(model):
        return None
    try:
        prompt, completion = import_litellm().cost_per_token(model=model, prompt_tokens=input_tokens,
                                                             completion_tokens=output_tokens,
                                                             cache_read_input_tokens=cached_input_tokens)
    except Exception:  # a model the table names without a usable price
        return None
    return float(prompt) + float(completion)


def turn_cost(usage: ReportedUsage, price_model: str | None = None) -> tuple[float | None, str | None]:
    """A turn's cost and, when the client priced it, the model it priced with; (None, None) when unknown."""
    if usage.cost_usd is not None:
        return usage.cost_usd, None
    model = usage.model if known_model(usage.model) else price_model
    cost = price_tokens(model, usage.input_tokens, usage.output_tokens, usage.cached_input_tokens)
    return (cost, model) if cost is not None else (None, None)


def check_price_model(model: str | None, flag: str = "--a2a-price-model") -> str | None:
    """`model` when LiteLLM's local cost map prices it; one line saying what to pass otherwise."""
    if model is None:
        return None
    if not known_model(model):
        raise ConfigError(f"{flag} {model}: LiteLLM's local cost map has no price for this model; name one it "
                          "prices, as LiteLLM spells it (e.g. gpt-4.1-2025-04-14, claude-sonnet-4-20250514, "
                          "gemini/gemini-2.5-flash).")
    return model
