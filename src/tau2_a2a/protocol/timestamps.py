"""A task status's timestamp written without a UTC offset, read as UTC. No I/O.

A2A types a status's `timestamp` as a protobuf Timestamp, whose JSON form is
RFC 3339 with an offset ("2026-11-26T11:38:39.403341Z"). Some servers write
it without one: fasta2a 2.1 (Pydantic AI's A2A server) writes
`datetime.now().isoformat()`. a2a-sdk's client then refuses the whole reply,
though tau2-a2a never reads the time. Such a timestamp is read as UTC; every
other byte of the reply is left as it came.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

_NAIVE = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?"
_NAIVE_IN_BODY = re.compile(rb'"timestamp"\s*:\s*"' + _NAIVE.encode() + rb'"')
_NAIVE_VALUE = re.compile(_NAIVE)


def naive_status_times_as_utc(body: bytes) -> bytes:
    """A JSON-RPC or HTTP+JSON reply body (or one event of a stream) with each task status's offset-less
    timestamp marked UTC; `body` itself when it has none."""
    if not _NAIVE_IN_BODY.search(body):
        return body
    try:
        reply = json.loads(body)
    except ValueError:
        return body
    changed = False
    for holder in _status_holders(reply):
        status = holder.get("status")
        stamp = status.get("timestamp") if isinstance(status, dict) else None
        if isinstance(status, dict) and isinstance(stamp, str) and _NAIVE_VALUE.fullmatch(stamp):
            status["timestamp"] = stamp + "Z"
            changed = True
    return json.dumps(reply, ensure_ascii=False).encode() if changed else body


def _status_holders(reply: object) -> Iterator[dict[str, Any]]:
    """The objects of a reply that carry a task status: the task or status update it is, or holds."""
    result = reply.get("result", reply) if isinstance(reply, dict) else None
    if not isinstance(result, dict):
        return
    candidates = [result, result.get("task"), result.get("statusUpdate")]
    tasks = result.get("tasks")
    if isinstance(tasks, list):
        candidates.extend(tasks)
    yield from (candidate for candidate in candidates if isinstance(candidate, dict))


def event_lines_as_utc(lines: bytes) -> bytes:
    """Event-stream lines with each event's offset-less status timestamp read as UTC."""
    if b'"timestamp"' not in lines:
        return lines
    return b"".join(_event_line_as_utc(line) for line in lines.splitlines(keepends=True))


def _event_line_as_utc(line: bytes) -> bytes:
    if not line.startswith(b"data:"):
        return line
    data = line[5:].strip()
    read = naive_status_times_as_utc(data)
    return line if read is data else b"data: " + read + line[len(line.rstrip(b"\r\n")):]
