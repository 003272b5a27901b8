"""Commands started as their own processes (a `tau2-a2a serve`, a `tau2-a2a agent`), read once their card answers."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

from tests.support.service import STARTUP_SECONDS
from tests.support.waiting import wait_until

CARD_PATH = "/.well-known/agent-card.json"


class Started:
    """A command started in `folder` (its output in a log file there), until stop()."""

    def __init__(self, command: list[str], folder: Path, env: Mapping[str, str] | None = None) -> None:
        self.command = command
        self.log = folder / f"{Path(command[0]).name}-{os.getpid()}-{time.monotonic_ns()}.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(command, cwd=folder, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})},
                                            start_new_session=True)

    def card(self, url: str, timeout: float = STARTUP_SECONDS) -> dict:
        """The card served at `url` once the command answers there (its log if it exits first)."""
        def served() -> dict | None:
            assert self.process.poll() is None, f"{shlex.join(self.command)} exited:\n{self.log.read_text()}"
            try:
                reply = httpx.get(url.rstrip("/") + CARD_PATH, timeout=5)
            except httpx.HTTPError:
                return None
            return reply.json() if reply.status_code == 200 else None

        return wait_until(served, lambda: f"a card at {url}; its log:\n{self.log.read_text()}", timeout, 0.3)

    def stop(self) -> None:
        """SIGTERM the command and what it started (its process group), SIGKILL after 30 s."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
