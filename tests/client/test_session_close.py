"""A request in flight when its run closes the session (a stopped run) is cut, not retried, and not reported as
the agent's failure: a stopped run's terminal shows its one line."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue

from tau2_a2a.client.config import A2AConfig
from tau2_a2a.client.errors import A2AFailure
from tau2_a2a.client.session import A2ASession
from tau2_a2a.protocol.hosting import BackgroundServer
from tau2_a2a.protocol.messages import user_turn
from tests.support.executors import agent_app
from tests.support.runs import FAST
from tests.support.waiting import wait_until


class Holds(AgentExecutor):
    """Holds every request until the test ends; says when one arrived."""

    def __init__(self) -> None:
        self.received = threading.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.received.set()
        await asyncio.sleep(120)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        pass


def test_a_request_cut_by_the_sessions_close_is_neither_retried_nor_reported(
        serve: Callable[..., BackgroundServer], caplog: pytest.LogCaptureFixture) -> None:
    agent = Holds()
    url = serve(lambda url: agent_app(agent, url)).url
    session = A2ASession(A2AConfig(endpoint=url, retry=FAST, timeout=5))  # the cut request ends by then
    ended: list[BaseException] = []

    def send() -> None:
        try:
            session.send(user_turn("hello"), None, None, 0)
        except A2AFailure as failure:
            ended.append(failure)

    sender = threading.Thread(target=send)
    with caplog.at_level(logging.WARNING, logger="tau2_a2a"):
        sender.start()
        wait_until(agent.received.is_set, "the request reaching the agent", 120)
        session.close()
        sender.join(60)
    assert not sender.is_alive() and len(ended) == 1
    assert [record.getMessage() for record in caplog.records] == []
