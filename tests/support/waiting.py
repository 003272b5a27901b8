"""Waiting for something to happen, the one way: a sync helper and its async twin, both bounded.

Each polls every `interval` seconds until the condition holds and returns what
it saw; past `timeout` (generous: the machine may be very busy) it fails with
"still waiting for WHAT after N s". A condition may assert by itself to fail
at once, for example when the process it waits on has exited (say why there).
`what` may be a callable, for words read at the deadline (a log's tail).
Waiting on an event that another thread sets needs no polling: use the event.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


def _words(what: str | Callable[[], str]) -> str:
    return what() if callable(what) else what


def wait_until(condition: Callable[[], T], what: str | Callable[[], str], timeout: float = 300,
               interval: float = 0.2) -> T:
    """Call `condition()` every `interval` seconds until it returns something true; that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"still waiting for {_words(what)} after {timeout:g} s"
        time.sleep(interval)


async def until(poll: Callable[[], Awaitable[T]], done: Callable[[T], Any], what: str | Callable[[], str],
                timeout: float = 240.0, interval: float = 0.2) -> T:
    """Await `poll()` every `interval` seconds until `done(value)`; that value."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await poll()
        if done(value):
            return value
        assert loop.time() < deadline, f"still waiting for {_words(what)} after {timeout:g} s: last saw {value!r}"
        await asyncio.sleep(interval)
