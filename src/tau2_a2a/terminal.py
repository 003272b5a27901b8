"""Whatever an agent says reaches a terminal as text: its control characters are shown, never obeyed.

A card's name, an error body, a task's status message come from the agent
under test, and a terminal obeys the control characters in them: ESC
sequences clear the screen or set the window title (OSC), a carriage return
overwrites a line already printed, a newline starts a fake one. `plain`
shows each C0 and C1 control character (and DEL) as an escape (`\\x1b`,
`\\r`) instead. It is applied where text leaves for a terminal (the command
line's printing, `PlainFormatter` for its logging) and where a message is
built from the agent's words, which then keeps no newline or tab either.
"""

from __future__ import annotations

import logging
import re

_ALL = re.compile("[\x00-\x1f\x7f-\x9f]")
_BUT_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # newline and tab kept
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    character = match.group()
    return _NAMED.get(character) or f"\\x{ord(character):02x}"


def plain(text: str, keep_lines: bool = False) -> str:
    """`text` with its control characters escaped; with `keep_lines`, newlines and tabs (ours) kept."""
    return (_BUT_LINES if keep_lines else _ALL).sub(_escape, text)


class PlainFormatter(logging.Formatter):
    """A log line as text: the agent's words inside it cannot drive the terminal (newlines and tabs kept)."""

    def format(self, record: logging.LogRecord) -> str:
        return plain(super().format(record), keep_lines=True)
