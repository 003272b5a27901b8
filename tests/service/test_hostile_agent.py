"""An evaluated agent that trickles or floods holds no slot of `tau2-a2a serve` past the operator's limits.

The service is a real `tau2-a2a serve` process with its default --max-running
(2); the agents are testbed/hostile_agent.py on loopback. The limits are the
operator's flags, and each reason the caller reads names the service's own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.hostile_agent import HostileAgent, Hostility
from tests.support.service import Service, ask, call_tool, result_data
from tests.support.waiting import until

RUN = "run_tau2_evaluation"
GENEROUS = 600.0  # seconds for a few evaluations of one task each on a busy 2-core machine


def one_task(endpoint: str) -> dict[str, Any]:
    return {"domain": "airline", "agent_endpoint": endpoint, "user": "scripted_user", "task_ids": ["0"]}


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    """`tau2-a2a serve --agent-timeout 4 --agent-max-tool-calls-per-reply 50`, loopback agents allowed; its
    evaluations at the service's own priority, which a busy machine's other work would otherwise starve."""
    running = Service(tmp_path / "results", "--agent-timeout", "4", "--agent-max-tool-calls-per-reply", "50",
                      "--evaluation-nice", "0").start()
    try:
        yield running
    finally:
        running.stop()


async def evaluations(url: str) -> list[dict[str, Any]]:
    return (await call_tool(url, "list_evaluations"))["evaluations"]


def test_agents_trickling_their_cards_free_their_slots_at_the_agent_timeout(service: Service, oracle_url: str) -> None:
    """Two such agents fill both slots; each evaluation fails after its card's 4 s, and the next one runs."""

    async def scenario() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        for _ in range(2):
            await ask(service.url, RUN, one_task(trickling.url), return_immediately=True)
        await until(lambda: evaluations(service.url), lambda found: len(found) == 2, "both evaluations", 120)
        oracle = result_data(await ask(service.url, RUN, one_task(oracle_url)))  # queued behind them, then run
        return await evaluations(service.url), oracle

    began = time.monotonic()
    with HostileAgent(Hostility(trickle="card", trickle_seconds=1)) as trickling:
        listed, oracle = asyncio.run(asyncio.wait_for(scenario(), GENEROUS))
    assert time.monotonic() - began < GENEROUS
    assert (oracle["status"], oracle["result"]["metrics"]["avg_reward"]) == ("completed", 1.0)
    trickled = [e for e in listed if e["agent_endpoint"] == trickling.url]
    assert [e["status"] for e in trickled] == ["failed", "failed"]
    for listed_one in trickled:
        record = asyncio.run(call_tool(service.url, "get_evaluation", {"evaluation_id": listed_one["evaluation_id"]}))
        assert record["error"] == (
            f"the evaluation process exited with code 2: Fetching the agent card {trickling.url}/.well-known/"
            "agent-card.json timed out after 4s; raise the service's --agent-timeout if the agent is slow.")


def test_a_flood_of_tool_calls_ends_at_the_operators_limit_and_the_evaluation_completes(service: Service) -> None:
    with HostileAgent(Hostility(flood=10_000)) as flooding:
        record = result_data(asyncio.run(asyncio.wait_for(ask(service.url, RUN, one_task(flooding.url)), GENEROUS)))
    assert record["status"] == "completed"
    assert record["result"]["metrics"]["avg_reward"] == 0.0
    assert record["result"]["a2a_errors"] == {"simulations": 1, "by_category": {"limit": 1}}
