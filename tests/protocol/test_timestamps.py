"""A task status's timestamp without a UTC offset (fasta2a's) is read as UTC; nothing else in a reply changes."""

from __future__ import annotations

import json

from a2a.types import SendMessageResponse, StreamResponse, Task
from a2a.utils.proto_utils import parse_lenient

from tau2_a2a.protocol.timestamps import naive_status_times_as_utc

NAIVE = "2026-11-26T11:38:39.403341"
TASK = {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_COMPLETED", "timestamp": NAIVE},
        "artifacts": [{"artifactId": "a1", "parts": [{"data": {"status": {"timestamp": NAIVE}, "timestamp": NAIVE}}]}]}


def body(value: dict) -> bytes:
    return json.dumps(value).encode()


def test_a_naive_status_time_is_read_as_utc_wherever_a2a_puts_a_status():
    for reply, path in [
        ({"jsonrpc": "2.0", "id": 1, "result": {"task": TASK}}, ("result", "task")),  # SendMessage
        ({"jsonrpc": "2.0", "id": 1, "result": TASK}, ("result",)),  # GetTask
        ({"jsonrpc": "2.0", "id": 1, "result": {"statusUpdate": TASK}}, ("result", "statusUpdate")),  # stream event
        (TASK, ()),  # HTTP+JSON
    ]:
        read = json.loads(naive_status_times_as_utc(body(reply)))
        holder = read
        for key in path:
            holder = holder[key]
        assert holder["status"]["timestamp"] == NAIVE + "Z"
        # The agent's own content keeps its bytes, whatever its keys are called.
        assert holder["artifacts"][0]["parts"][0]["data"] == {"status": {"timestamp": NAIVE}, "timestamp": NAIVE}


def test_a2a_sdk_reads_the_reply_once_its_status_time_is_marked():
    reply = {"task": TASK}
    try:
        parse_lenient(reply, SendMessageResponse())
    except Exception as error:  # noqa: BLE001 - the reason this module exists
        assert "timestamp" in str(error)
    else:
        raise AssertionError("a2a-sdk now reads offset-less timestamps: protocol/timestamps.py can go")
    read = parse_lenient(json.loads(naive_status_times_as_utc(body(reply))), SendMessageResponse())
    assert read.task.status.timestamp.ToJsonString() == NAIVE + "Z"
    assert parse_lenient(json.loads(naive_status_times_as_utc(body({"task": TASK}))), StreamResponse()).task.id == "t1"
    assert parse_lenient(json.loads(naive_status_times_as_utc(body(TASK))), Task()).id == "t1"


def test_replies_without_a_naive_status_time_are_the_same_bytes():
    with_offset = body({"result": {**TASK, "status": {"state": "TASK_STATE_WORKING", "timestamp": NAIVE + "Z"}}})
    assert naive_status_times_as_utc(with_offset) is with_offset
    for unchanged in (b"", b"not json", b'{"timestamp": "' + NAIVE.encode() + b'"', body({"result": None}),
                      body({"result": {"message": {"parts": [{"text": "hi"}]}}})):
        assert naive_status_times_as_utc(unchanged) is unchanged
