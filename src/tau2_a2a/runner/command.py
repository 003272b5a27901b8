"""A command of this process's: its logging, and the exit code and one line for however it ended.

Used by the command line (every `tau2-a2a` command) and by the service's
evaluation processes (`python -m tau2_a2a.runner`), so both end alike: no
traceback for a setting that cannot work, Ctrl-C ending at once with what
finished kept.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from tau2_a2a.runner.interrupt import EXIT_INTERRUPTED, RunInterrupted, exit_now, stopped_by
from tau2_a2a.runner.outcome import exit_code_for
from tau2_a2a.terminal import PlainFormatter, plain

if TYPE_CHECKING:
    from loguru import Record


def run_as_command(command: Callable[[], int], debug: bool = False,
                   resume_hint: Callable[[RunInterrupted], str] | None = None) -> int:
    """Run `command` with our logging on stderr; its exit code, or the one for what it raised."""
    with command_logging(debug):
        try:
            return int(command() or 0)
        except RunInterrupted as interrupted:
            # Simulations abandoned in their threads would hold up a normal exit until they end.
            hint = f"; to resume, run: {resume_hint(interrupted)}" if resume_hint else ""
            exit_now(interrupted.exit_code, f"{interrupted}{hint}")
        except KeyboardInterrupt:
            by, code = stopped_by()
            exit_now(code, f"Stopped by {by}.")
        except Exception as error:
            exit_code = exit_code_for(error)
            if exit_code is None:
                raise
            print(f"error: {plain(str(error))}", file=sys.stderr)  # one line, whatever the agent put in it
            return exit_code
    return EXIT_INTERRUPTED  # not reached: exit_now ends the process


@contextmanager
def command_logging(debug: bool) -> Iterator[None]:
    """Our stdlib logging to stderr for one command (tau2 resets loguru's sinks, not
    these); put back as it was afterwards, for callers of main() in a process.

    Every log line reaches the terminal as text (terminal.py): ours, what other
    libraries log through Python's last-resort handler, and tau2's (loguru), whose
    messages may quote the agent under test."""
    from loguru import logger as loguru_logger

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(PlainFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    package = logging.getLogger("tau2_a2a")
    handlers, level, propagate = package.handlers[:], package.level, package.propagate
    package.handlers[:] = [handler]
    package.setLevel(logging.INFO if debug else logging.WARNING)
    package.propagate = False
    last_resort = logging.lastResort
    last_resort_formatter = last_resort.formatter if last_resort is not None else None
    if last_resort is not None:
        last_resort.setFormatter(PlainFormatter("%(message)s"))
    loguru_logger.configure(patcher=_plain_loguru_message)  # loguru cannot take a patcher back: it checks _plain
    _plain.append(True)
    try:
        yield
    finally:
        _plain.pop()
        package.handlers[:] = handlers
        package.setLevel(level)
        package.propagate = propagate
        if last_resort is not None:
            last_resort.setFormatter(last_resort_formatter)


_plain: list[bool] = []  # one entry per command whose logging is in place


def _plain_loguru_message(record: Record) -> None:
    if _plain:
        record["message"] = plain(record["message"], keep_lines=True)
