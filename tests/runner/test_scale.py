"""Concurrent simulations against one A2A agent: they overlap, share one HTTP pool, leave nothing behind.

Behaviour only, no clock: an oracle that holds every first reply until all
conversations have started proves the simulations run at once.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from pathlib import Path

import uvicorn
from a2a.server.agent_execution import RequestContext
from a2a.server.events import EventQueue

from tau2_a2a.protocol.hosting import a2a_app, free_port
from tau2_a2a.protocol.messages import read_turn
from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card
from tau2_a2a.tau2bench.participants.oracle_script import find_marker
from tests.support.runs import run_a2a

TASKS = ["1", "3", "5"]
BENCH = Path(__file__).resolve().parents[2] / "bench" / "scale_slow_agent.py"


def _bench_module():
    spec = importlib.util.spec_from_file_location("scale_slow_agent", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BarrierOracle(OracleExecutor):
    """The oracle, but no first reply goes out before `parties` conversations have started."""

    def __init__(self, parties: int) -> None:
        super().__init__()
        self.parties = parties
        self.started = 0
        self.all_started = asyncio.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        if find_marker(read_turn(context.message).user_text) is not None:
            self.started += 1
            if self.started >= self.parties:
                self.all_started.set()
            await asyncio.wait_for(self.all_started.wait(), timeout=120)
        await super().execute(context, event_queue)


class Server:
    """uvicorn on loopback that keeps idle connections open, so the count shows the client's pool."""

    def __init__(self, app) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app(self.url), host="127.0.0.1", port=self.port,
                                                    log_level="warning", timeout_keep_alive=600))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        while not self.server.started:
            assert self.thread.is_alive(), "server failed to start"
            threading.Event().wait(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def test_concurrent_simulations_share_one_pool(tmp_path):
    counter_type = _bench_module().ConnectionCounter
    oracle = BarrierOracle(parties=len(TASKS))
    counters = []

    def app(url: str):
        counters.append(counter_type(a2a_app(oracle, oracle_card(url))))
        return counters[0]

    with Server(app) as server:
        outcome = run_a2a(server.url, tmp_path, task_ids=TASKS, max_concurrency=len(TASKS))
    stats = counters[0].stats()

    assert sorted(s.task_id for s in outcome.results.simulations) == sorted(TASKS)
    assert all(s.reward_info.reward == 1.0 for s in outcome.results.simulations)
    # All conversations were open at once, and the agent saw as many requests in flight.
    assert oracle.started == len(TASKS)
    assert stats["peak_in_flight"] == len(TASKS)
    # One pool for the endpoint: no more connections than requests that were ever in flight at once.
    assert stats["connections"] <= len(TASKS)
    sent = [r for s in outcome.metrics["simulations"] for r in s["requests"] if r["method"] == "SendMessage"]
    assert stats["requests"] == len(sent) + 2  # and the agent card and the access check, once each
    # Nothing kept per conversation once it ended.
    assert oracle._plans == {}
