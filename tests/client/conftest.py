"""Fixtures of the client's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testbed.hostile_agent import HostileAgent


@pytest.fixture
def hostile() -> Iterator[list[HostileAgent]]:
    """Start hostile agents: hostile.append(HostileAgent(...).start()); each is stopped after the test."""
    agents: list[HostileAgent] = []
    yield agents
    for agent in agents:
        agent.stop()
