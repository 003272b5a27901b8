"""The fork server: one process, started by the service, that has tau2, LiteLLM and the runner imported and
forks one child per evaluation (`python -m tau2_a2a.service.jobs.forkserver FD`; warm.py is the service's side).

Why: an evaluation's own process spent about 5 s of CPU importing tau2 before its first simulation; niced
below the service on a busy machine, that took minutes, and a trickling agent held a slot the while. A child
forked from here starts with everything imported.

What must not cross a fork is never made here: the server imports and starts nothing (no thread, no event
loop, no socket but its two pipes to the service, no database, no LiteLLM client: `mend_import_effects` drops
the one tau2's import makes). It is single-threaded and waits on the service's socket and on SIGCHLD.

The child is what `start_child` makes, done after the fork: a session of its own, its own environment
(the service's, with its trace context and no secret), umask 077, its directory, its log on stdout and
stderr, nice steps below the service; then the runner's entry point with the run's request (settings, the
target's token) read from the service's socket, never from its environment. It dies when this server does,
and this server dies when the service's socket closes (the service ended, even by SIGKILL).

The protocol, per child, on a socket pair whose end the service passes over the control socket: the child
writes `{"pid": N}` once it leads its session; the service sends the run's launch as JSON and closes its
side; the child writes `{"running": true}` once set up; this server writes `{"pid": N, "exit": CODE}` when it
has reaped the child (CODE as subprocess gives it: negative for a signal).
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

READY = b"R"  # the server to the service: imported, forking on request
FORK = b"F"  # the service to the server: fork a child for the connection passed with this byte

PRELOADED = ("litellm", "tau2_a2a.runner.__main__", "tau2_a2a.tau2bench.seam.hooks")


def preload() -> None:
    """Import what every evaluation imports, and leave the process as a runner would find it."""
    import importlib

    for name in PRELOADED:
        importlib.import_module(name)
    from tau2_a2a.tau2bench.seam.distribution import mend_import_effects

    mend_import_effects()
    gc.collect()
    gc.freeze()  # what the import made stays shared with the children, not copied as they collect


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    with ending_with_parent():
        preload()
    if threading.active_count() > 1:  # a fork copies no thread: an import that started one is named here
        names = ", ".join(thread.name for thread in threading.enumerate() if thread is not threading.current_thread())
        print(f"tau2-a2a fork server: importing started threads ({names}); they do not cross the fork",
              file=sys.stderr, flush=True)
    control.sendall(READY)
    serve(control)
    sys.stdout.flush(), sys.stderr.flush()
    os._exit(0)  # nothing of what the imports registered to run at exit is ours to run


@contextmanager
def ending_with_parent() -> Iterator[None]:
    """Inside, this process ends as soon as the service does: importing takes minutes on a busy machine, and
    the service's socket is read only afterwards. The watching thread is gone before anything is forked."""
    parent, stop = os.getppid(), threading.Event()

    def watch() -> None:
        while not stop.wait(0.25):
            if os.getppid() != parent:
                os._exit(0)

    watcher = threading.Thread(target=watch, daemon=True, name="fork server: exit with the service")
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()


def serve(control: socket.socket) -> None:
    """Fork a child per request until the service's socket closes; report each child's exit to its connection."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda number, frame: None)  # the wakeup fd says it; the loop reaps
    children: dict[int, socket.socket] = {}
    while True:
        readable, _, _ = select.select([control.fileno(), wake_read], [], [])
        if wake_read in readable:
            while True:
                try:
                    if not os.read(wake_read, 512):
                        break
                except BlockingIOError:
                    break
            reap(children)
        if control.fileno() in readable:
            try:
                message, fds, _, _ = socket.recv_fds(control, 1, 1)
            except OSError:
                message, fds = b"", []
            if not message:
                return  # the service is gone: so are we, and our children after us (runner/parent.py)
            if message != FORK or not fds:
                for fd in fds:
                    os.close(fd)
                continue
            connection = socket.socket(fileno=fds[0])
            sys.stdout.flush(), sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                os.close(wake_read)
                os.close(wake_write)
                control.close()
                for other in children.values():
                    other.close()
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                code = 70  # EX_SOFTWARE: the child failed before its run could say why
                try:
                    code = child(connection)
                except BaseException as error:  # one line where its log (or, before, the service's) is
                    print(f"tau2-a2a fork server: an evaluation's process failed to start: {type(error).__name__}: "
                          f"{error}", file=sys.stderr)
                finally:
                    for stream in (sys.stdout, sys.stderr):
                        try:
                            stream.flush()
                        except (OSError, ValueError):
                            pass
                    os._exit(code)
            children[pid] = connection


def reap(children: dict[int, socket.socket]) -> None:
    """Every child that ended: its exit code to the service."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        connection = children.pop(pid, None)
        if connection is None:
            continue
        try:
            connection.sendall(json.dumps({"pid": pid, "exit": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
        except OSError:
            pass  # the service stopped listening for it
        connection.close()


def child(connection: socket.socket) -> int:
    """In the forked child: become the evaluation's process (see the module's docstring), then run it."""
    os.setsid()  # before the service learns the pid: it stops the child with its session
    connection.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")
    launch = receive_launch(connection)
    if launch is None:
        return 0  # the service gave up on this start: nothing ran
    become(launch)
    connection.sendall(b'{"running": true}\n')
    connection.close()
    from tau2_a2a.runner.__main__ import main as run

    return run(launch["stdin"])


def receive_launch(connection: socket.socket) -> dict[str, Any] | None:
    chunks = []
    while chunk := connection.recv(65536):
        chunks.append(chunk)
    return json.loads(b"".join(chunks)) if chunks else None


def become(launch: dict[str, Any]) -> None:
    """The child's own process state: umask, directory, log, environment, priority."""
    os.umask(launch["umask"])
    os.chdir(launch["directory"])
    log = os.open(launch["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(log, 0o600)
    os.dup2(log, 1), os.dup2(log, 2)
    os.close(log)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.environ.clear()
    os.environ.update(launch["env"])
    os.environ[launch["exit_with_variable"]] = str(os.getppid())  # this server, which dies with the service
    lower_priority(launch["priority"], launch["nice"])


def lower_priority(priority: int, nice: int) -> None:
    """Run at `priority` (the service's plus the nice steps), and lower this new session's autogroup (Linux)."""
    if not nice:
        return
    try:
        os.setpriority(os.PRIO_PROCESS, 0, priority)
    except OSError:
        pass  # the platform refuses: it runs as it is
    try:
        Path("/proc/self/autogroup").write_text(str(nice))
    except OSError:
        pass  # no autogroup here: nice suffices


if __name__ == "__main__":
    main()
