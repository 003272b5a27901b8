"""`tau2-a2a` in this process: for tests of what a command decides (a refusal, its one line, its exit code)
rather than of the process it runs in. A new process imports tau2 again (about 8 s of CPU); tests of the
command as a process (signals, output at exit, imports) use tests.support.cli.run_cli."""

from __future__ import annotations

import pytest

from tau2_a2a.cli import main


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`tau2-a2a ARGS` run by its own main(): (exit code, stdout, stderr), argparse's refusals included."""
    capsys.readouterr()
    try:
        code = main(args)
    except SystemExit as stop:  # argparse refuses a flag by exiting
        code = stop.code if isinstance(stop.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err
