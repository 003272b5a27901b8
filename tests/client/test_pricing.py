"""Reported tokens priced from LiteLLM's local cost map, or left unknown: never a made-up zero."""

from __future__ import annotations

import os
import subprocess
import sys

import litellm
import pytest

from tau2_a2a.client.config import A2AConfig
from tau2_a2a.client.pricing import price_tokens, turn_cost
from tau2_a2a.errors import ConfigError
from tau2_a2a.litellm_cost_map import COST_MAP_ENV
from tau2_a2a.protocol.usage import ReportedUsage

MODEL = "gpt-4.1-2025-04-14"
# LiteLLM's local table for this model (USD per token): input, cached input, output
INPUT, CACHED, OUTPUT = litellm.model_cost[MODEL]["input_cost_per_token"], \
    litellm.model_cost[MODEL]["cache_read_input_token_cost"], litellm.model_cost[MODEL]["output_cost_per_token"]


def test_tokens_of_a_known_model_are_priced_from_the_local_table() -> None:
    assert price_tokens(MODEL, 1000, 100) == pytest.approx(1000 * INPUT + 100 * OUTPUT, rel=1e-12)
    assert price_tokens(MODEL, 1000, 100, cached_input_tokens=800) == pytest.approx(
        200 * INPUT + 800 * CACHED + 100 * OUTPUT, rel=1e-12)
    assert price_tokens(f"openai/{MODEL}", 1000, 100) == price_tokens(MODEL, 1000, 100)


def test_a_model_without_a_price_leaves_the_cost_unknown() -> None:
    assert price_tokens("standin", 1000, 100) is None
    assert price_tokens(None, 1000, 100) is None


def test_a_reported_cost_is_taken_as_it_is() -> None:
    assert turn_cost(ReportedUsage(10, 1, cost_usd=0.25, model=MODEL), price_model="gpt-4o") == (0.25, None)


def test_tokens_without_a_cost_are_priced_with_the_reported_model_else_the_users() -> None:
    priced = price_tokens(MODEL, 10, 1)
    assert turn_cost(ReportedUsage(10, 1, model=MODEL)) == (priced, MODEL)
    assert turn_cost(ReportedUsage(10, 1)) == (None, None)
    assert turn_cost(ReportedUsage(10, 1), price_model=MODEL) == (priced, MODEL)
    assert turn_cost(ReportedUsage(10, 1, model="my-finetune"), price_model=MODEL) == (priced, MODEL)


def test_a_price_model_litellm_does_not_know_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError) as refused:
        A2AConfig(endpoint="http://127.0.0.1:9", price_model="gpt-99-turbo")
    assert str(refused.value).startswith("--a2a-price-model gpt-99-turbo: LiteLLM's local cost map has no price")
    config = A2AConfig(endpoint="http://127.0.0.1:9", price_model=MODEL)
    assert config.as_record()["a2a_price_model"] == MODEL
    assert A2AConfig.from_record(config.as_record()) == config
    assert "a2a_price_model" not in A2AConfig(endpoint="http://127.0.0.1:9").as_record()


def test_importing_the_package_leaves_the_environment_alone_and_pricing_asks_for_the_bundled_cost_map() -> None:
    script = ("import os, sys, tau2_a2a, tau2_a2a.client.pricing as pricing; "
              f"print(os.environ.get({COST_MAP_ENV!r}), 'litellm' in sys.modules); "
              "pricing.known_model('gpt-4.1'); "
              f"print(os.environ.get({COST_MAP_ENV!r}), 'litellm' in sys.modules)")
    env = {name: value for name, value in os.environ.items() if name != COST_MAP_ENV}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["None", "False", "True", "True"]
