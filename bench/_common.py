"""Shared by the benchmarks: the oracle agent as a separate process, like a real agent."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from tau2_a2a.protocol.hosting import wait_for_card  # noqa: E402

BIN = Path(sys.executable).parent


@contextmanager
def oracle_process(port: int, delay: float = 0.0, grpc_port: int | None = None) -> Iterator[str]:
    """`tau2-a2a agent oracle` in its own process; yields its URL once the card answers.

    With `grpc_port` (e.g. a `free_port()`) it serves gRPC there too, declared in its card;
    the gRPC server starts before the HTTP one, so it is up once the card answers.
    """
    script = BIN / "tau2-a2a"  # without the script (tau2-a2a on PYTHONPATH only), the module
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "tau2_a2a.cli"]
    command = [*cli, "agent", "oracle", "--port", str(port), "--delay", str(delay)]
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
