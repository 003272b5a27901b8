"""Shared by the service benchmarks: `tau2-a2a serve` as its own process, and A2A calls to it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tau2_a2a.protocol.hosting import wait_for_card

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
BIN = Path(sys.executable).parent


@contextmanager
def service_process(port: int, results_dir: Path, *extra: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """`tau2-a2a serve` in its own process, as deployed; yields its URL and process."""
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [str(BIN / "tau2-a2a"), "serve", "--port", str(port), "--results-dir", str(results_dir),
         "--allowed-targets", "public,loopback", *extra],  # the agents under test listen on loopback
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_card(url, process)
        yield url, process
    finally:
        process.terminate()
        process.wait(timeout=30)


def peak_rss_mb(pid: int) -> float | None:
    """Peak resident memory of a live process (Linux)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


async def call(client: Any, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    """One blocking structured request; the reply: the final Task, or the Message a read-only tool answers with."""
    from a2a.client import ClientCallContext
    from a2a.types import SendMessageRequest

    from tau2_a2a.service.caller import request_message

    reply = None
    request = SendMessageRequest(message=request_message(tool, arguments))
    async for event in client.send_message(request, context=ClientCallContext(timeout=1800)):
        reply = event.message if event.HasField("message") else event.task
    return reply
