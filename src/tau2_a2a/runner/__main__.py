"""`python -m tau2_a2a.runner`: one run, its settings read as JSON from stdin.

The evaluation service starts each evaluation so, in a process of its own (or
forks it from its fork server, service/jobs/forkserver.py, which hands main()
the same document):
`{"settings": RunSettings.to_dict(), "auth_token": "...", "outcome_file": PATH}`
on stdin, nothing on the command line, so no setting is ever a flag to quote
and the token is in no process listing or environment. The exit codes are
`tau2-a2a run`'s (runner/outcome.py); with `outcome_file`, the run also writes
how it ended there (runner/outcome_file.py), whoever started it reads that.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tau2_a2a.client import tracing
from tau2_a2a.errors import ConfigError
from tau2_a2a.runner.command import run_as_command
from tau2_a2a.runner.interrupt import stop_on_sigint
from tau2_a2a.runner.outcome import print_outcome
from tau2_a2a.runner.outcome_file import ended_by, ended_with, write_outcome
from tau2_a2a.runner.parent import exit_with_parent
from tau2_a2a.runner.run import evaluate
from tau2_a2a.runner.settings import RunSettings
from tau2_a2a.tau2bench.seam.distribution import mend_import_effects

_REQUEST_FORM = '{"settings": RunSettings.to_dict(), "auth_token": TOKEN or null, "outcome_file": PATH or null}'


def read_request(text: str) -> dict[str, Any]:
    """The JSON document on stdin; one line saying what is wrong."""
    try:
        request = json.loads(text)
    except ValueError as error:
        raise ConfigError(f"The run's request on stdin is not JSON ({error}); send {_REQUEST_FORM}.") from None
    if not isinstance(request, dict):
        raise ConfigError(f"The run's request on stdin is not a JSON object; send {_REQUEST_FORM}.")
    return request


def settings_of(request: dict[str, Any]) -> RunSettings:
    """The run's settings, with the token that travelled beside them; one line saying what is wrong."""
    try:
        return RunSettings.from_dict(request["settings"], request.get("auth_token"))
    except (ValueError, KeyError, TypeError) as error:
        raise ConfigError(f"The run's settings on stdin are not a run request ({error}); send "
                          f"{_REQUEST_FORM}.") from None


@contextmanager
def outcome_written(path: Path | None) -> Iterator[None]:
    """Inside, a run that raises has its outcome written to `path` before the error goes on (to run_as_command,
    which says it and sets the exit code)."""
    try:
        yield
    except BaseException as error:
        if path is not None:
            write_outcome(path, ended_by(error))
        raise


def main(request_text: str | None = None) -> int:
    """The run `request_text` asks for (read from stdin when None: a child forked warm is handed it)."""
    exit_with_parent()
    mend_import_effects()  # this process is tau2-a2a's own

    def run() -> int:
        request = read_request(sys.stdin.read() if request_text is None else request_text)
        outcome_file = Path(request["outcome_file"]) if request.get("outcome_file") else None
        with outcome_written(outcome_file):
            settings = settings_of(request)
            tracing.setup()
            with stop_on_sigint(), tracing.continued(tracing.environment_carrier()):  # the starter's trace, if any
                outcome = evaluate(settings)
                code = print_outcome(outcome)
            if outcome_file is not None:
                write_outcome(outcome_file, ended_with(outcome, code))
            return code

    return run_as_command(run)


if __name__ == "__main__":
    sys.exit(main())
