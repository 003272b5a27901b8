"""A real a2a-sdk 0.3 client, run by .venv-a2a03's python (never imported by the 1.x tests).

It talks to an agent the way AgentBeats' gateway (a2a-sdk 0.3.22) does: it
reads the card with A2ACardResolver, builds a Client with ClientFactory,
sends one message with streaming on, follows the status updates and, from
the final task, collects every data part of every artifact (and text parts
that parse as JSON). It prints one JSON object on stdout:

    {"sdk_version": "0.3.22", "card": {...the 0.3 fields it read...}, "transport": "JSONRPC",
     "events": ["task", "status-update", ...], "states": [...],
     "final": {"kind": "task" | "message", "state": ..., "text": [...], "results": [...]}}

or {"error": "..."} with exit code 1.

    .venv-a2a03/bin/python testbed/sdk03_client.py URL --parts '[{"kind": "text", "text": "hi"}]' \
        [--transport HTTP+JSON] [--token TOKEN]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from importlib.metadata import version
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import DataPart, Message, Part, Role, Task, TextPart, TransportProtocol


def request(parts: list[dict[str, Any]]) -> Message:
    return Message(role=Role.user, message_id=str(uuid.uuid4()), parts=[Part.model_validate(p) for p in parts])


def part_values(parts: list[Part]) -> tuple[list[str], list[Any]]:
    """Texts, and results as the gateway collects them: data parts and text parts that parse as JSON."""
    texts, results = [], []
    for part in parts:
        if isinstance(part.root, DataPart):
            results.append(part.root.data)
        elif isinstance(part.root, TextPart):
            texts.append(part.root.text)
            try:
                results.append(json.loads(part.root.text))
            except ValueError:
                pass
    return texts, results


def final_of(reply: Task | Message) -> dict[str, Any]:
    if isinstance(reply, Message):
        texts, results = part_values(reply.parts)
        return {"kind": "message", "text": texts, "results": results}
    parts = [part for artifact in reply.artifacts or [] for part in artifact.parts]
    texts, results = part_values(parts)
    status_text, _ = part_values(reply.status.message.parts) if reply.status.message else ([], [])
    return {"kind": "task", "state": reply.status.state.value, "text": texts, "results": results,
            "status_text": status_text}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    async with httpx.AsyncClient(headers=headers, timeout=args.timeout) as http:
        card = await A2ACardResolver(http, args.url).get_agent_card()
        config = ClientConfig(streaming=True, httpx_client=http,
                              supported_transports=[TransportProtocol(args.transport)])
        client = ClientFactory(config).create(card)
        events: list[str] = []
        states: list[str] = []
        reply: Task | Message | None = None
        message = request(json.loads(args.parts))
        async for event in client.send_message(message):
            if isinstance(event, Message):
                events.append("message")
                reply = event
                continue
            task, update = event
            events.append(update.kind if update is not None else "task")
            states.append(task.status.state.value)
            reply = task
        await client.close()
    if reply is None:
        raise RuntimeError("the agent sent no reply")
    return {
        "sdk_version": version("a2a-sdk"),
        "card": {"name": card.name, "url": card.url, "preferred_transport": card.preferred_transport,
                 "protocol_version": card.protocol_version,
                 "additional_interfaces": [{"transport": i.transport, "url": i.url}
                                           for i in card.additional_interfaces or []]},
        "transport": args.transport,
        "events": events,
        "states": states,
        "final": final_of(reply),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--parts", required=True, help='The message\'s parts, A2A 0.3 JSON: [{"kind": "text", ...}]')
    parser.add_argument("--transport", default="JSONRPC", choices=["JSONRPC", "HTTP+JSON"],
                        help="0.3.22's gRPC client sends an invalid metadata key (X-A2A-Extensions), so not gRPC")
    parser.add_argument("--token", default=None, help="Bearer token")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    try:
        print(json.dumps(asyncio.run(run(args))))
    except Exception as error:  # noqa: BLE001  (the test reads the reason; no traceback)
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
