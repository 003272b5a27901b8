"""What one A2A request cost and how it ended: the record the client keeps of every request.

Records travel inside the trajectory (`AssistantMessage.raw_data["a2a"]`), so
tau2 saves them with each simulation as it finishes: a killed run keeps them.
The run's metrics file is built from them (runner/protocol_metrics.py).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from tau2_a2a.litellm_cost_map import use_bundled_cost_map
from tau2_a2a.protocol.messages import part_size_text

if TYPE_CHECKING:
    from a2a.types import Part

RAW_DATA_KEY = "a2a"
TRACE_ID_KEY = "trace_id"  # with tracing on, in the first A2A record of a trajectory: the simulation's trace

_node = socket.gethostname()


def set_node(name: str) -> None:
    """Name the node this process's records come from (a Ray worker names its Ray node)."""
    global _node
    _node = name


def current_node() -> str:
    """The node records made now name: the host name, or the Ray node id inside a Ray actor."""
    return _node


@dataclass
class RequestRecord:
    """One A2A request: what it cost and how it ended. Failed requests too.

    `turn` counts the messages of a simulation from 0; it is None for the
    requests made before any simulation (discovery). `context_id` is the A2A
    context of the simulation, also for an attempt refused before the agent
    had opened it; None only when no reply ever named one. `node` and
    `process` say where the request was made: with --ray, which Ray node
    and which worker process.
    """

    turn: int | None
    attempt: int
    method: str
    endpoint: str
    protocol_version: str
    context_id: str | None
    http_status: int | None
    latency_ms: float
    request_bytes: int
    response_bytes: int
    input_tokens: int
    output_tokens: int
    error: str | None = None
    error_message: str | None = None
    unknown_tool_calls: int = 0
    transport: str | None = None  # the card's binding: JSONRPC, HTTP+JSON or GRPC (None: the card fetch)
    grpc_status: str | None = None  # over gRPC: OK or the status code that ended the request
    events: int = 0  # A2A events received: 1 for a blocking reply, one per event of a stream
    first_event_ms: float | None = None  # time to the first event (equal to the latency when blocking)
    node: str = field(default_factory=current_node)
    process: int = field(default_factory=os.getpid)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class TokenCounter:
    """cl100k_base from the tokenizer files litellm ships: works offline.

    A message counts as the sum of its parts: each text, and each data part as
    sorted JSON. The parts that open every simulation (the policy, the tool
    schemas) are the same each time, so a part's count is kept by its content
    and tokenized once per process, not once per request.
    """

    MAX_KEPT = 4096

    def __init__(self) -> None:
        self._encoding: Any = None  # loaded at the first count: importing litellm takes seconds
        self._by_content: dict[str | bytes, int] = {}

    def count(self, text: str) -> int:
        if not text:
            return 0
        if self._encoding is None:
            use_bundled_cost_map()
            from litellm.litellm_core_utils.default_encoding import encoding

            self._encoding = encoding
        return len(self._encoding.encode(text, disallowed_special=()))

    def count_parts(self, parts: Iterable[Part]) -> int:
        """Tokens of A2A parts, each counted by its content (metadata, such as the trial's seed, aside)."""
        total = 0
        for part in parts:
            if part.HasField("text"):
                key: str | bytes = part.text
            elif part.HasField("data"):
                key = part.data.SerializeToString(deterministic=True)
            else:
                continue
            tokens = self._by_content.get(key)
            if tokens is None:
                tokens = self.count(part_size_text(part))
                if len(self._by_content) >= self.MAX_KEPT:
                    self._by_content.clear()
                self._by_content[key] = tokens
            total += tokens
        return total


def trace_id_of(messages: Iterable[object]) -> str | None:
    """The simulation's trace id kept in its trajectory (messages as tau2's models or as a results file's dicts);
    None when it was not traced."""
    for message in messages:
        raw = message.get("raw_data") if isinstance(message, dict) else getattr(message, "raw_data", None)
        record = (raw or {}).get(RAW_DATA_KEY) if isinstance(raw, dict) else None
        if isinstance(record, dict) and record.get(TRACE_ID_KEY):
            return str(record[TRACE_ID_KEY])
    return None
