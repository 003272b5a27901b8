"""A real OTLP/HTTP receiver on loopback (oteltap) that keeps every span it is sent, for tests to read.

oteltap streams spans to asyncio subscribers; this runs it on an event loop
of its own thread, subscribed from the start, and keeps every span in a list
that tests wait on (by condition, never by sleeping).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from oteltap import OtelTapHttpProtobufReceiver, OtelTapHttpProtobufReceiverSettings

from tau2_a2a.protocol.hosting import free_port


@dataclass(frozen=True)
class Span:
    """One received span, its ids in hex, its attributes as Python values."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    status_code: int
    status_message: str
    kind: int
    raw: Any

    @classmethod
    def of(cls, span: Any) -> Span:
        return cls(span.name, span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex(),
                   {a.key: _value(a.value) for a in span.attributes}, span.status.code, span.status.message,
                   span.kind, span)


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


class SpanReceiver:
    """oteltap listening on a free loopback port; `endpoint` is the value for OTEL_EXPORTER_OTLP_ENDPOINT."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.spans: list[Span] = []
        self._changed = threading.Condition()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stopping: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="otlp-receiver", daemon=True)

    def start(self) -> SpanReceiver:
        self._thread.start()
        if not self._ready.wait(30) or self._error is not None:
            raise RuntimeError(f"the OTLP receiver did not start: {self._error}")
        return self

    def stop(self) -> None:
        if self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(30)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._receive())

    async def _receive(self) -> None:
        self._stopping = asyncio.Event()
        try:
            settings = OtelTapHttpProtobufReceiverSettings(http_port=self.port)
            receiver = await OtelTapHttpProtobufReceiver(settings).start()
        except BaseException as error:  # noqa: BLE001  (said by start())
            self._error = error
            self._ready.set()
            return
        stream = receiver.stream_traces()
        collect = asyncio.create_task(self._collect(stream))
        await asyncio.sleep(0)  # the subscription is in place before anyone is told the receiver is ready
        self._ready.set()
        await self._stopping.wait()
        collect.cancel()
        await receiver.stop()

    async def _collect(self, stream: Any) -> None:
        async for span in stream:
            with self._changed:
                self.spans.append(Span.of(span))
                self._changed.notify_all()

    def wait_for(self, condition: Callable[[list[Span]], Any], timeout: float = 120.0) -> Any:
        """The first truthy `condition(spans)` as spans arrive; AssertionError with what came after `timeout`."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = condition(list(self.spans))
                if found:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    names = sorted({s.name for s in self.spans})
                    raise AssertionError(f"spans never met the condition; {len(self.spans)} received: {names}")
                self._changed.wait(left)

    def trace(self, trace_id: str) -> list[Span]:
        with self._changed:
            return [span for span in self.spans if span.trace_id == trace_id]


def ancestors(span: Span, spans: list[Span]) -> Iterator[Span]:
    """`span`'s parent, its parent's parent, ... among `spans` (of one trace)."""
    by_id = {s.span_id: s for s in spans}
    current = by_id.get(span.parent_id)
    while current is not None:
        yield current
        current = by_id.get(current.parent_id)


def descends_from(span: Span, ancestor: Span, spans: list[Span]) -> bool:
    return any(a.span_id == ancestor.span_id for a in ancestors(span, spans))
