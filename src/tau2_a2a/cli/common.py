"""What every command of the command line shares: the parser that errs in one line, and the A2A flags."""

from __future__ import annotations

import argparse
import os

from tau2_a2a.client.config import AUTH_TOKEN_ENV, TRANSPORTS
from tau2_a2a.runner.outcome import EXIT_USAGE


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad flag gets one line (what is wrong, where to look) instead of the usage text."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"error: {message} (see {self.prog} --help)\n")


def add_transport_args(parser: argparse._ActionsContainer, default: str | None = "auto") -> None:
    parser.add_argument("--a2a-transport", choices=TRANSPORTS, default=default,
                        help="A2A binding to use: auto takes the card's first interface tau2-a2a speaks "
                             "(default: auto)")
    parser.add_argument("--a2a-streaming", action="store_true",
                        help="Send SendStreamingMessage when the card says the agent streams (blocking otherwise)")


def auth_token(flag_value: str | None) -> str | None:
    """The agent's bearer token: the flag's, else $TAU2_A2A_AUTH_TOKEN's, else none."""
    return flag_value or os.environ.get(AUTH_TOKEN_ENV) or None
