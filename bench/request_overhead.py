"""Per-request protocol overhead of the client against an agent that answers at once.

Side by side in one run, against the same agent process: our A2A session
(a2a-sdk client, metering, token counting, retries) versus a bare httpx POST
of the same JSON-RPC body. Two message sizes: a user turn, and a first
message (policy and tools). Prints mean/p50 per request and the ratios.

    .venv/bin/python bench/request_overhead.py [--requests 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import oracle_process  # noqa: E402

import httpx  # noqa: E402
import tau2_a2a  # noqa: E402,F401
from a2a.types import Message, Role, SendMessageRequest  # noqa: E402
from google.protobuf.json_format import MessageToDict  # noqa: E402
from tau2.agent.llm_agent import AGENT_INSTRUCTION, SYSTEM_PROMPT  # noqa: E402
from tau2.registry import registry  # noqa: E402

from tau2_a2a.client.session import A2ASession  # noqa: E402
from tau2_a2a.config import A2AConfig  # noqa: E402
from tau2_a2a.protocol.messages import conversation_start, user_turn  # noqa: E402
from tau2_a2a.serving import free_port  # noqa: E402


def first_message_parts() -> list:
    environment = registry.get_env_constructor("airline")()
    system = SYSTEM_PROMPT.format(agent_instruction=AGENT_INSTRUCTION, domain_policy=environment.get_policy())
    schemas = [tool.openai_schema for tool in environment.get_tools()]
    return conversation_start(system, schemas, user_turn("I want to change my flight."), [])


def timed(function, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        function()
        samples.append((time.perf_counter() - started) * 1000.0)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    with oracle_process(free_port()) as url:
        session = A2ASession(A2AConfig(endpoint=url))
        raw = httpx.Client(headers={"A2A-Version": "1.0"})
        print(f"{args.requests} sequential requests per arm to an agent that answers at once ({url})")
        for label, parts in (("user turn", user_turn("Yes, please.")), ("first message", first_message_parts())):
            def ours() -> None:
                session.send(parts, None, None, 0)

            def bare() -> None:
                message = Message(role=Role.ROLE_USER, parts=parts, message_id=str(uuid.uuid4()))
                body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                        "params": MessageToDict(SendMessageRequest(message=message))}
                raw.post(url + "/", json=body).raise_for_status()

            timed(ours, 10), timed(bare, 10)  # warm both paths
            ours_ms, bare_ms = [], []
            for _ in range(args.requests // 10):  # interleave so both see the same machine
                ours_ms += timed(ours, 10)
                bare_ms += timed(bare, 10)
            print(
                f"  {label:13s} session mean {statistics.mean(ours_ms):7.2f} ms  p50 {statistics.median(ours_ms):7.2f} ms | "
                f"bare httpx mean {statistics.mean(bare_ms):7.2f} ms  p50 {statistics.median(bare_ms):7.2f} ms | "
                f"ratio {statistics.mean(ours_ms) / statistics.mean(bare_ms):.2f}x, "
                f"overhead {statistics.mean(ours_ms) - statistics.mean(bare_ms):+.2f} ms/request"
            )
        session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
