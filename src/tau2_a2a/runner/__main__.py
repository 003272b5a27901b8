"""`python -m tau2_a2a.runner`: one run, its settings read as JSON from stdin.

The evaluation service starts each evaluation so, in a process of its own:
`{"settings": RunSettings.to_dict(), "auth_token": "..."}` on stdin, nothing
on the command line, so no setting is ever a flag to quote and the token is
in no process listing or environment. The exit codes are `tau2-a2a run`'s
(runner/outcome.py).
"""

from __future__ import annotations

import json
import sys

from tau2_a2a.client import tracing
from tau2_a2a.errors import ConfigError
from tau2_a2a.runner.command import run_command
from tau2_a2a.runner.interrupt import stop_on_sigint
from tau2_a2a.runner.outcome import report_outcome
from tau2_a2a.runner.parent import exit_with_parent
from tau2_a2a.runner.run import evaluate
from tau2_a2a.runner.settings import RunSettings


def read_settings(text: str) -> RunSettings:
    """The run's settings and token from the JSON document on stdin; one line saying what is wrong."""
    try:
        request = json.loads(text)
        return RunSettings.from_dict(request["settings"], request.get("auth_token"))
    except (ValueError, KeyError, TypeError) as error:
        raise ConfigError(f"The run's settings on stdin are not a run request ({error}); send "
                          '{"settings": RunSettings.to_dict(), "auth_token": TOKEN or null}.') from None


def main() -> int:
    exit_with_parent()

    def run() -> int:
        settings = read_settings(sys.stdin.read())
        tracing.setup()
        with stop_on_sigint(), tracing.continued(tracing.environment_carrier()):  # the starter's trace, if any
            return report_outcome(evaluate(settings))

    return run_command(run)


if __name__ == "__main__":
    sys.exit(main())
