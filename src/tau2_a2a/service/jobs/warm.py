"""Warm starts: the service's side of its fork server (forkserver.py), and the evaluation processes it forks.

The service starts one fork server when its scheduler starts; it imports tau2 in the background while the
service answers. Once it says it is ready, each evaluation's process is forked from it; until then, and if
it cannot start or has gone, evaluations start cold (`python -m tau2_a2a.runner`), as the log says.

A forked evaluation is not the service's child but the fork server's, so WarmProcess gives the supervisor
what subprocess.Popen gives it for a cold one: the pid (of a session leader, to stop with its session), the
exit code (the fork server reaps the child and sends it), waiting, signals.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from typing import Any

from tau2_a2a.service.jobs.forkserver import FORK, READY

log = logging.getLogger("tau2_a2a.service")

MODULE = "tau2_a2a.service.jobs.forkserver"
STARTED_SECONDS = 120.0  # how long a fork may take to answer on a busy machine before the start counts as failed


class ForkServerError(Exception):
    """The fork server could not fork this evaluation's process (the start falls back to cold)."""


class WarmProcess:
    """An evaluation's process forked by the fork server, as the supervisor uses a Popen."""

    def __init__(self, pid: int, connection: socket.socket, returncode: int | None = None) -> None:
        self.pid = pid
        self.returncode = returncode
        self._connection = connection
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        """The exit code once a wait() has read it (the supervisor's watcher waits all along), else None."""
        return self.returncode

    def wait(self) -> int:
        """Block until the fork server reports the exit; the exit code (negative: killed by that signal)."""
        with self._lock:
            if self.returncode is None:
                self.returncode = self._read_exit()
                self._connection.close()
        return self.returncode

    def send_signal(self, number: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, number)

    def _read_exit(self) -> int:
        for message in _messages(self._connection, timeout=None):
            if "exit" in message:
                return int(message["exit"])
        # The fork server went away first; the child goes with it (runner/parent.py): make sure, and say so.
        log.warning("the fork server ended while the evaluation process %d ran; it is killed", self.pid)
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass
        return -signal.SIGKILL


def _messages(connection: socket.socket, timeout: float | None) -> Any:
    """The JSON lines read from `connection` until it closes (socket.timeout after `timeout` seconds of silence)."""
    connection.settimeout(timeout)
    buffered = b""
    while True:
        while b"\n" in buffered:
            line, buffered = buffered.split(b"\n", 1)
            yield json.loads(line)
        chunk = connection.recv(4096)
        if not chunk:
            return
        buffered += chunk


class ForkServer:
    """The service's fork server: `python -m tau2_a2a.service.jobs.forkserver` run by `python` with `env`."""

    def __init__(self, python: str, env: Mapping[str, str]) -> None:
        self.python = python
        self.env = dict(env)
        self._process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._ready = threading.Event()
        self._ended = threading.Event()  # it failed to start, or went away
        self._lock = threading.Lock()

    @property
    def ready(self) -> bool:
        return self._ready.is_set() and not self._ended.is_set()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def wait_ready(self, timeout: float) -> bool:
        """Whether it is ready within `timeout` seconds (False at once if it failed to start)."""
        deadline = time.monotonic() + timeout
        while not self._ready.wait(0.1):
            if self._ended.is_set() or time.monotonic() > deadline:
                return False
        return self.ready

    def start(self) -> None:
        """Start it; it becomes ready in the background (or fails, and evaluations start cold)."""
        control, theirs = socket.socketpair()
        try:
            self._process = subprocess.Popen(
                [self.python, "-m", MODULE, str(theirs.fileno())], pass_fds=(theirs.fileno(),), env=self.env,
                stdin=subprocess.DEVNULL, start_new_session=True)  # stdout, stderr: the service's log
        except OSError as error:
            control.close()
            self._ended.set()
            log.warning("the fork server could not start (%s: %s); evaluations start cold",
                        type(error).__name__, error)
            return
        finally:
            theirs.close()
        self._control = control
        threading.Thread(target=self._await_ready, daemon=True, name="fork server start").start()

    def _await_ready(self) -> None:
        assert self._control is not None and self._process is not None
        try:
            said = self._control.recv(1)
        except OSError:
            said = b""
        if said == READY:
            self._ready.set()
            log.info("fork server ready (pid %d): evaluations start warm", self._process.pid)
            return
        self._ended.set()
        code = self._process.wait()
        log.warning("the fork server ended before it was ready (exit code %d; its output is above in this log); "
                    "evaluations start cold", code)

    def fork(self, launch: dict[str, Any]) -> WarmProcess:
        """Fork an evaluation's process and hand it `launch` (forkserver.become's fields and the run's request);
        ForkServerError if that cannot be done (nothing ran then)."""
        if not self.ready or self._control is None:
            raise ForkServerError("the fork server is not ready")
        mine, theirs = socket.socketpair()
        try:
            with self._lock:
                try:
                    socket.send_fds(self._control, [FORK], [theirs.fileno()])
                except OSError as error:
                    self._ended.set()
                    raise ForkServerError(f"the fork server is gone ({type(error).__name__})") from None
            theirs.close()
            return self._handed(mine, launch)
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()

    def _handed(self, connection: socket.socket, launch: dict[str, Any]) -> WarmProcess:
        """`launch` handed to the new child on `connection`; the child, set up and running."""
        replies = _messages(connection, timeout=STARTED_SECONDS)
        try:
            started = next(replies, None)
        except (TimeoutError, OSError) as error:
            raise ForkServerError(f"no process was forked ({type(error).__name__})") from None
        if started is None or "pid" not in started:
            self._ended.set()
            raise ForkServerError("the fork server is gone")
        pid = int(started["pid"])
        if "exit" in started:  # it ended before it could say it started
            return WarmProcess(pid, connection, returncode=int(started["exit"]))
        connection.sendall(json.dumps(launch).encode())
        connection.shutdown(socket.SHUT_WR)
        try:
            running = next(replies, None)
        except (TimeoutError, OSError):
            running = None
        if running is not None and "exit" in running:  # it ended while being set up; its log says why
            return WarmProcess(pid, connection, returncode=int(running["exit"]))
        if running is None or not running.get("running"):
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            return WarmProcess(pid, connection)  # the fork server reports its end
        return WarmProcess(pid, connection)

    def close(self) -> None:
        """Stop it (its children, if any are left, go with it)."""
        control, process = self._control, self._process
        self._ended.set()
        if control is not None:
            control.close()
        if process is None:
            return
        try:
            process.wait(10 if self._ready.is_set() else 0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
