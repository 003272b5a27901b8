"""ConfigError: the error every layer raises for a setting the user gave that cannot work."""

from __future__ import annotations


class ConfigError(ValueError):
    """A setting the user gave cannot work; the message says which and why, and what to do."""
