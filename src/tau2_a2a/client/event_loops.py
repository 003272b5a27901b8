"""Where a2a-sdk's coroutines run: on the calling thread's own event loop, or on a background one.

tau2 runs simulations in worker threads; a2a-sdk is async. A worker thread
runs a2a-sdk's coroutines itself, on an event loop of its own, so a request
costs no hand-over to another thread. gRPC's channel belongs to one event
loop, and a thread already running a loop cannot block in it: that work goes
to a loop kept in a background thread instead.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _OwnLoop:
    """This thread's event loop for a2a-sdk's coroutines; closed when the thread ends."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def __del__(self) -> None:
        self.loop.close()


_own_loops = threading.local()
# A forked worker must not share its parent's loop (its selector and wake-up pipe): it makes its own.
os.register_at_fork(after_in_child=lambda: _own_loops.__dict__.clear())


def run_here(coroutine: Awaitable[T]) -> T:
    """Run a coroutine to its end on this thread's own event loop."""
    own: _OwnLoop | None = getattr(_own_loops, "own", None)
    if own is None:
        own = _own_loops.own = _OwnLoop()
    return own.loop.run_until_complete(coroutine)


def in_event_loop() -> bool:
    """Whether the calling thread is running an event loop (which must not be blocked)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True



class BackgroundLoop:
    """An event loop running in a daemon thread of its own, started at its first use."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine to its end on the background loop, and wait for it here."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop()).result()

    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop, started if it was not."""
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, name=self._name, daemon=True)
                self._thread.start()
            return self._loop

    def close(self) -> None:
        """Stop the loop and its thread, if it ever started."""
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
            self._loop.close()
