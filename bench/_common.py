"""Shared by the benchmarks: the oracle agent as a separate process, like a real agent."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
BIN = Path(sys.executable).parent


@contextmanager
def oracle_process(port: int, delay: float = 0.0) -> Iterator[str]:
    """`tau2-a2a agent oracle` in its own process; yields its URL once the card answers."""
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [str(BIN / "tau2-a2a"), "agent", "oracle", "--port", str(port), "--delay", str(delay)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/.well-known/agent-card.json", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the oracle agent did not start")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
