"""Shared by the benchmarks: the agents as separate processes, like real agents, and the stand-in LLM."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from tau2_a2a.protocol.hosting import wait_for_card  # noqa: E402

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parent.parent


def cli() -> list[str]:
    """`tau2-a2a`: its script, or the module when tau2-a2a is only on PYTHONPATH."""
    script = BIN / "tau2-a2a"
    return [str(script)] if script.exists() else [sys.executable, "-m", "tau2_a2a.cli"]


@contextmanager
def oracle_process(port: int, delay: float = 0.0, grpc_port: int | None = None) -> Iterator[str]:
    """`tau2-a2a agent oracle` in its own process; yields its URL once the card answers.

    With `grpc_port` (e.g. a `free_port()`) it serves gRPC there too, declared in its card;
    the gRPC server starts before the HTTP one, so it is up once the card answers.
    """
    command = [*cli(), "agent", "oracle", "--port", str(port), "--delay", str(delay)]
    if grpc_port is not None:
        command += ["--grpc-port", str(grpc_port)]
    with serving_process(command, port) as url:
        yield url


@contextmanager
def serving_process(command: list[str], port: int, stop_seconds: float = 60) -> Iterator[str]:
    """A server process of this project on `port`; yields its URL once its card answers."""
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_card(url, process)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=stop_seconds)


@contextmanager
def standin_process(port: int, faults: str = "none", start_seconds: float = 120) -> Iterator[str]:
    """testbed/standin_llm.py in its own process (`--faults none|hashed`); yields its api base once it answers."""
    process = subprocess.Popen([sys.executable, "-m", "testbed.standin_llm", "--port", str(port), "--faults", faults],
                               cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    api_base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + start_seconds
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the stand-in LLM exited with {process.returncode} before answering")
            try:
                if httpx.post(f"{api_base}/chat/completions", json={"messages": []}, timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the stand-in LLM did not answer within {start_seconds:g} s")
            time.sleep(0.2)
        yield api_base
    finally:
        process.terminate()
        process.wait(timeout=60)
