"""The MCP tools server's bounds on connections: a cap on open ones and a deadline to send each request.

The tools server may listen on every address, where the agent under test is a
neighbour on the network and needs no token to open a connection. uvicorn
holds a connection that trickles its request headers for as long as the peer
likes, and opens as many as the peer asks: enough of them take the process's
file descriptors, and with them the run's results file. So the server's HTTP
protocol (uvicorn's h11 one, subclassed) enforces two bounds:

- **a read deadline**: a request's headers and body must have arrived within
  `read_timeout` seconds of the connection opening, or of the previous
  response ending (a keep-alive connection's idle time counts too); past it
  the connection is closed. A request being answered (a tool call waiting for
  tau2) is never cut: the agent's own deadline, `--a2a-timeout`, bounds that.
- **a connection cap**: over `max_connections` open connections, a new one
  closes the oldest connection still sending its first request, if any, else
  the oldest idle one between requests, else it is closed at once. A flood of
  slow connections so evicts itself, and an MCP client that sends its request
  promptly keeps being served: its keep-alive connection, idle between two
  calls, is not what a flood of new connections takes. The
  listen backlog is the cap too: asyncio accepts that many at once, before
  the protocol sees any, so the server holds at most twice the cap.

What is refused is counted and logged once per kind, not once per connection;
the same goes for accept errors (`Too many open files`), which asyncio would
otherwise report with a traceback each time it retries.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("tau2_a2a.mcp")

# The cap is at most this share of the process's descriptors. asyncio accepts up to the listen backlog (set to
# the cap) at once before the guard sees them, so the server holds at most twice the cap for a moment: a quarter
# of the descriptors. The rest stays for the run's files (results, policies) and its connections to the agent.
DESCRIPTOR_SHARE = 8


def effective_cap(max_connections: int) -> int:
    """`max_connections`, lowered to an eighth of the process's descriptor limit when that is smaller."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return max_connections
    return max(1, min(max_connections, soft // DESCRIPTOR_SHARE))


@dataclass
class GuardCounts:
    """What the guard refused so far (each kind is logged the first time only)."""

    evicted: int = 0  # idle or slow connections closed to make room for a new one
    refused: int = 0  # new connections closed at once: every open one had a request being answered
    timed_out: int = 0  # connections that did not send their request within the read deadline
    accept_errors: int = 0  # accepts that failed (out of descriptors or memory)


@dataclass
class ConnectionGuard:
    """The bounds one server's connections share, and what they refused."""

    max_connections: int
    read_timeout: float
    counts: GuardCounts = field(default_factory=GuardCounts)
    # connections with no request being answered, oldest first: those still sending their first request, and
    # those served before, idle or sending their next one (evicted only when no first-timer is left)
    _first: OrderedDict[GuardedH11, None] = field(default_factory=OrderedDict)
    _served: OrderedDict[GuardedH11, None] = field(default_factory=OrderedDict)
    _open: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def protocol(self) -> type[H11Protocol]:
        """uvicorn's `http` setting for a server under this guard."""
        guard = self

        class Guarded(GuardedH11):
            pass

        Guarded.guard = guard
        return Guarded

    def note(self, kind: str, message: str) -> None:
        """Count one refusal of `kind` (a GuardCounts field); log it if it is the first of its kind."""
        with self._lock:
            count = getattr(self.counts, kind) + 1
            setattr(self.counts, kind, count)
        if count == 1:
            log.warning("MCP tools server: %s (further ones are counted, not logged)", message)

    def summary(self) -> str | None:
        """One line on what was refused, or None when nothing was."""
        c = self.counts
        if not (c.evicted or c.refused or c.timed_out or c.accept_errors):
            return None
        return (f"MCP tools server refused connections: {c.timed_out} did not send their request within "
                f"{self.read_timeout:g}s, {c.evicted} idle ones closed and {c.refused} refused over the cap of "
                f"{self.max_connections}, {c.accept_errors} accept errors")

    def loop_exception_handler(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """asyncio's handler on the server's loop: accept errors counted and logged once, the rest as asyncio
        would."""
        if "accept" in str(context.get("message", "")):
            error = context.get("exception")
            self.note("accept_errors", f"could not accept a connection ({error}); asyncio retries every second")
            return
        loop.default_exception_handler(context)


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with the guard's read deadline and connection cap (see the module)."""

    guard: ConnectionGuard

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
        super().connection_made(transport)  # type: ignore[arg-type]
        self._deadline: asyncio.TimerHandle | None = None
        self._was_served = False
        guard = self.guard
        if len(self.connections) > guard.max_connections:
            victim = next(iter(guard._first), None) or next(iter(guard._served), None)
            if victim is None:
                guard.note("refused", f"a connection over the cap of {guard.max_connections} open ones was closed "
                                      "at once: every open one has a request being answered")
                self.transport.close()
                return
            guard.note("evicted", f"{guard.max_connections} connections open (the cap): the oldest idle or "
                                  "slow one is closed for each new one")
            victim._cut()
        self._start_reading()

    def _start_reading(self) -> None:
        """The connection now owes a request: it has `read_timeout` seconds to send it whole."""
        self._stop_reading()
        (self.guard._served if self._was_served else self.guard._first)[self] = None
        self._deadline = self.loop.call_later(self.guard.read_timeout, self._too_slow)

    def _stop_reading(self) -> None:
        self.guard._first.pop(self, None)
        self.guard._served.pop(self, None)
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        self.guard.note("timed_out", f"a connection that did not send its request within "
                                     f"{self.guard.read_timeout:g}s was closed")
        self._cut()

    def _cut(self) -> None:
        self._stop_reading()
        if not self.transport.is_closing():
            self.transport.close()

    def handle_events(self) -> None:
        super().handle_events()
        cycle = self.cycle
        if self._deadline is not None and cycle is not None and not cycle.response_complete and not cycle.more_body:
            self._stop_reading()  # the request is in whole: answering it is the app's, however long it takes

    def on_response_complete(self) -> None:
        self._was_served = True
        if not self.transport.is_closing():
            self._start_reading()  # before uvicorn takes a pipelined request, which stops the clock again
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        if hasattr(self, "_deadline"):
            self._stop_reading()
        super().connection_lost(exc)
