"""Warm starts: the service's side of its fork server (forkserver.py), and the evaluation processes it forks.

The service starts its fork server when it first needs it: a service that runs no evaluation imports no tau2.
An evaluation that arrives while the fork server imports waits for it (StartingProcess, off the caller's
thread) up to WAIT_SECONDS rather than import tau2 again beside it; if the fork server cannot start, has
gone, or is not ready by then, the evaluation starts cold (`python -m tau2_a2a.runner`), as the log says.

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
from collections.abc import Callable, Mapping
from typing import Any

from tau2_a2a.service.jobs.forkserver import FORK, READY

log = logging.getLogger("tau2_a2a.service")

MODULE = "tau2_a2a.service.jobs.forkserver"
STARTED_SECONDS = 120.0  # how long a fork may take to answer on a busy machine before the start counts as failed
WAIT_SECONDS = 120.0  # how long an evaluation waits for a fork server still importing before it starts cold


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


class StartingProcess:
    """An evaluation's process while it starts on a thread of its own, so that the caller's thread (the
    scheduler's, which renews leases) never waits for an import: forked once `forkserver` is ready (launched
    now if this is its first need), or started cold by `cold` if it fails, has gone, or is not ready within
    WAIT_SECONDS. Once started, it is used as the Popen or WarmProcess it became."""

    def __init__(self, forkserver: ForkServer, launch: dict[str, Any],
                 cold: Callable[[], subprocess.Popen[bytes]], name: str) -> None:
        self._forkserver, self._launch, self._cold, self._name = forkserver, launch, cold, name
        self._process: subprocess.Popen[bytes] | WarmProcess | None = None
        self._failure: str | None = None  # why no process started, if none did
        self.not_started: str | None = None  # the kind of error that kept it from starting
        self._begun = False  # a process is being started: too late to cancel
        self._canceled = False
        self._settled = threading.Event()  # started, failed to, or canceled
        self._lock = threading.Lock()
        forkserver.launch()
        threading.Thread(target=self._start, daemon=True, name=f"start {name}").start()

    def wait_started(self) -> subprocess.Popen[bytes] | WarmProcess | None:
        """The process it became, once its start is settled (None if none started)."""
        self._settled.wait()
        return self._process

    @property
    def pid(self) -> int:
        """The started process's pid, waiting for its start (see the module's docstring)."""
        self._settled.wait()
        if self._process is None:
            raise ForkServerError(f"the evaluation's process did not start: {self._failure}")
        return self._process.pid

    def poll(self) -> int | None:
        if not self._settled.is_set():
            return None
        return self._process.poll() if self._process is not None else self._code()

    def wait(self) -> int:
        self._settled.wait()
        return self._process.wait() if self._process is not None else self._code()

    def send_signal(self, number: int) -> None:
        self._settled.wait()
        if self._process is not None:
            self._process.send_signal(number)

    def cancel(self) -> bool:
        """Keep it from starting, if it has not begun to; whether it was kept (its wait() then says killed)."""
        with self._lock:
            if self._begun:
                return False
            self._canceled = True
            self._failure = "canceled before it started"
        self._settled.set()
        return True

    def _code(self) -> int:
        return -signal.SIGKILL if self._canceled else 70  # EX_SOFTWARE: it never ran; the log says why

    def _start(self) -> None:
        ready = self._forkserver.wait_ready(WAIT_SECONDS)
        with self._lock:
            if self._canceled:
                return
            self._begun = True
        process: subprocess.Popen[bytes] | WarmProcess | None = None
        try:
            if ready:
                try:
                    process = self._forkserver.fork(self._launch)
                except ForkServerError as error:
                    log.warning("evaluation in %s starts cold: %s", self._name, error)
            else:
                log.warning("evaluation in %s starts cold: %s", self._name,
                            f"the fork server was not ready within {WAIT_SECONDS:.0f} s"
                            if self._forkserver.available else "the fork server failed to start")
            if process is None:
                process = self._cold()
            log.info("evaluation in %s started %s (pid %d)", self._name,
                     "warm" if isinstance(process, WarmProcess) else "cold", process.pid)
        except Exception as error:  # nothing ran: the evaluation fails, saying so in the service's log
            self._failure = f"{type(error).__name__}: {error}"
            self.not_started = type(error).__name__
            log.warning("evaluation in %s: its process could not start: %s", self._name, self._failure)
        finally:
            self._process = process
            self._settled.set()


class ForkServer:
    """The service's fork server: `python -m tau2_a2a.service.jobs.forkserver` run by `python` with `env`,
    launched on first need (the first wait_ready) once start() allowed it."""

    def __init__(self, python: str, env: Mapping[str, str]) -> None:
        self.python = python
        self.env = dict(env)
        self._process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._allowed = False  # start() was called: the first need launches it
        self._ready = threading.Event()
        self._ended = threading.Event()  # it failed to start, went away, or was closed
        self._lock = threading.Lock()

    @property
    def ready(self) -> bool:
        return self._ready.is_set() and not self._ended.is_set()

    @property
    def available(self) -> bool:
        """Whether it is ready, or may become so (allowed, not failed, not closed)."""
        return self._allowed and not self._ended.is_set()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def wait_ready(self, timeout: float) -> bool:
        """Whether it is ready within `timeout` seconds, launching it if this is its first need (False at
        once if it failed to start, was closed, or start() was never called)."""
        self.launch()
        deadline = time.monotonic() + timeout
        while not self._ready.wait(0.1):
            if self._ended.is_set() or time.monotonic() > deadline:
                return False
        return self.ready

    def start(self) -> None:
        """Allow it: it is launched when an evaluation first needs it, and gets ready in the background (or
        fails, and evaluations start cold)."""
        self._allowed = True

    def launch(self) -> None:
        """Launch it now if allowed and not yet launched (a first need); it gets ready in the background."""
        with self._lock:
            if not self._allowed or self._process is not None or self._ended.is_set():
                return
            control, theirs = socket.socketpair()
            try:
                self._process = subprocess.Popen(
                    [self.python, "-m", MODULE, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                    env=self.env, stdin=subprocess.DEVNULL, start_new_session=True)  # stdout, stderr: the log
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
        """Stop it (its children, if any are left, go with it); one never launched is never launched."""
        with self._lock:
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
