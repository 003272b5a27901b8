"""One send to the agent: how it runs (SendOptions), what it brought back (Exchange), and a send on a thread
of its own that another thread can end (InFlight)."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from dataclasses import dataclass, field

from a2a.types import Message, Task, TaskState

from tau2_a2a.client.records import RequestRecord
from tau2_a2a.client.transport import Wire


@dataclass
class Exchange:
    """One send: the agent's final reply and a record per request it took."""

    reply: Message | Task
    context_id: str | None
    task_id: str | None
    records: list[RequestRecord] = field(default_factory=list)


@dataclass(frozen=True)
class SendOptions:
    """How one send runs: the time each of its requests has, whether a failed attempt may be sent again, and
    who is told of each request as it starts (so that another thread can end it: `Wire.abort()`)."""

    timeout: float
    may_retry: Callable[[], bool] = lambda: True
    on_request: Callable[[Wire], None] | None = None


@dataclass
class InFlight:
    """A message sent on a thread of its own (`A2ASession.send_in_background`): its reply to come, and a way to
    end it from another thread once its simulation is over."""

    future: concurrent.futures.Future[Exchange] = field(default_factory=concurrent.futures.Future)
    wires: list[Wire] = field(default_factory=list)  # one per request it made, in order
    aborted: bool = False

    def started(self, wire: Wire) -> None:
        """A request of this send starts: it can be ended (at once, if the send was aborted already)."""
        self.wires.append(wire)
        if self.aborted:
            wire.abort()

    def abort(self) -> None:
        """End the send now, whatever it waits for: its thread then ends with AgentRequestAborted."""
        self.aborted = True
        for wire in list(self.wires):
            wire.abort()


def open_task_id(reply: Message | Task) -> str | None:
    """A task the agent left waiting for input is continued; any other is not."""
    if isinstance(reply, Task) and reply.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
        return reply.id
    return None
