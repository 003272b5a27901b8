"""What every layer shares about errors: ConfigError, raised for a setting the user gave that cannot work, and
first_line, how an error is quoted inside one line of ours."""

from __future__ import annotations

QUOTED_LENGTH = 300  # characters of another error's message quoted in one of ours


class ConfigError(ValueError):
    """A setting the user gave cannot work; the message says which and why, and what to do."""


def first_line(error: BaseException) -> str:
    """The first non-blank line of `error`'s message (at most QUOTED_LENGTH characters), or its type's name when
    it has none: enough to say what went wrong without a traceback's worth of text."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0][:QUOTED_LENGTH] if lines else type(error).__name__
