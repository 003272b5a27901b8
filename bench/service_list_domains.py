"""Latency of list_domains under 50 concurrent A2A requests, against one request at a time.

`tau2-a2a serve` runs in its own process; after one warm-up call, this sends
--sequential requests one after the other, then --concurrent requests at
once (each its own A2A request), and prints the latency percentiles of both and
their ratio, measured side by side in one run.

    python bench/service_list_domains.py --concurrent 50
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from service_common import call, percentile, service_process

from tau2_a2a.protocol.hosting import free_port


async def timed(client, latencies: list[float]) -> bool:
    from a2a.types import Message, TaskState

    started = time.perf_counter()
    reply = await call(client, "list_domains")
    latencies.append((time.perf_counter() - started) * 1000)
    return isinstance(reply, Message) or reply.status.state == TaskState.TASK_STATE_COMPLETED


async def measure(url: str, sequential: int, concurrent: int) -> tuple[list[float], list[float], float, int]:
    from tau2_a2a.service.caller import connect

    client, http = await connect(url)
    try:
        await timed(client, [])  # warm-up: the domain catalog is loaded once
        one_by_one: list[float] = []
        for _ in range(sequential):
            await timed(client, one_by_one)
        at_once: list[float] = []
        started = time.perf_counter()
        ok = await asyncio.gather(*(timed(client, at_once) for _ in range(concurrent)))
        wall = time.perf_counter() - started
    finally:
        await http.aclose()
    return one_by_one, at_once, wall, sum(ok)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument("--sequential", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="service_list_domains_") as tmp, \
            service_process(free_port(), Path(tmp)) as (url, _):
        one_by_one, at_once, wall, ok = asyncio.run(measure(url, args.sequential, args.concurrent))

    def row(name: str, values: list[float]) -> str:
        return (f"{name:<22} {percentile(values, 50):>8.1f} {percentile(values, 95):>8.1f} "
                f"{max(values):>8.1f}")

    print("list_domains over A2A (tau2-a2a serve, no model), latency in ms, one run")
    print(f"{'':<22} {'p50':>8} {'p95':>8} {'max':>8}")
    print(row(f"{args.sequential} one at a time", one_by_one))
    print(row(f"{args.concurrent} concurrent", at_once))
    print(f"concurrent/sequential: p50 x{percentile(at_once, 50) / percentile(one_by_one, 50):.1f}, "
          f"p95 x{percentile(at_once, 95) / percentile(one_by_one, 95):.1f}")
    print(f"{ok}/{args.concurrent} completed; {args.concurrent / wall:.0f} requests/s concurrent vs "
          f"{1000 / percentile(one_by_one, 50):.0f} requests/s one at a time")


if __name__ == "__main__":
    main()
