"""The flags of the installed `tau2 run`, and what `tau2-a2a run` does with each: none is dropped silently.

A flag whose destination is a RunSettings field of the same name is that
setting (cli/run.py builds RunSettings from them); `--auto-resume` is
accepted, since tau2-a2a never asks before resuming. Every other flag of
tau2's is refused in one line naming it and why, when given: upstream's
voice (audio-native, full-duplex) flags, which configure simulations
tau2-a2a does not run, `--user-persona`, which a text run of upstream's
cannot use, and any flag a later tau2 adds that tau2-a2a does not know yet.
docs/tau2-run-parity.md has the table.
"""

from __future__ import annotations

import argparse
from dataclasses import fields
from typing import Any

from tau2_a2a.cli.tau2_flags_cache import add_tau2_flags
from tau2_a2a.errors import ConfigError
from tau2_a2a.runner.settings import RunSettings

# RunSettings' fields a flag of the same name sets; `a2a` is made from the --a2a-* flags (see cli/run.py).
SETTINGS = tuple(item.name for item in fields(RunSettings) if item.name != "a2a")

_VOICE = ("configures tau2's voice (audio-native, full-duplex) simulations, which tau2-a2a does not run (its "
          "agents, native or over A2A, are text agents); leave it out")
_VOICE_PROMPT = ("picks the system prompt format of tau2's audio-native agent, which tau2-a2a does not run "
                 "(`tau2 run` ignores it in a text run); leave it out")
# tau2's flags that are no setting of a text run, each with why it is refused and what to do.
REFUSED = {
    **{name: _VOICE for name in (
        "audio_native", "audio_native_provider", "audio_native_model", "cascaded_config", "tick_duration",
        "max_steps_seconds", "speech_complexity", "pcm_sample_rate", "telephony_rate", "wait_to_respond_other",
        "wait_to_respond_self", "yield_when_interrupted", "yield_when_interrupting", "interruption_check_interval",
        "integration_duration", "silence_annotation_threshold", "audio_debug", "audio_taps")},
    "reasoning_effort": ("reaches only tau2's audio-native agent, which tau2-a2a does not run (`tau2 run` ignores it "
                         "in a text run); for a text agent's LLM, pass --agent-llm-args "
                         "'{\"reasoning_effort\": \"high\"}' instead"),
    "xml_prompt": _VOICE_PROMPT,
    "no_xml_prompt": _VOICE_PROMPT,
    "user_persona": ("would change nothing: `tau2 run` parses it and drops it in a text run, and tau2's text user "
                     "simulator has no place for a persona (its guidelines, data/tau2/user_simulator/"
                     "simulation_guidelines*.md, hold no <PERSONA_GUIDELINES> slot); leave it out"),
}
UNKNOWN = "is a flag of this tau2 that tau2-a2a does not know, so it cannot honour it; leave it out"
# tau2's flags that are accepted and set nothing, each with why.
ACCEPTED = {
    "auto_resume": ("tau2-a2a never asks before resuming: it resumes a run with the same settings and refuses one "
                    "with other settings"),
}
_NOT_SETTINGS = "not_settings"  # where the parser keeps the destinations of tau2's flags that are no setting


def add_tau2_run_args(parser: argparse.ArgumentParser) -> None:
    """The installed tau2's `run` flags (through the seam, with tau2-a2a's --results-dir on upstream; described
    once and cached: `tau2_flags_cache`). Those that are no setting get no default, so that `refuse_unsupported`
    knows when one is given, and say so in --help. Its --agent and --user offer tau2-a2a's agents and user."""
    before = {action.dest for action in parser._actions}
    add_tau2_flags(parser)
    not_settings = []
    for action in parser._actions:
        if action.dest in before or action.dest in SETTINGS or action.dest in ACCEPTED:
            continue
        not_settings.append(action.dest)
        action.default = None
        action.help = f"Refused by tau2-a2a: it {REFUSED.get(action.dest, UNKNOWN)}."
    for action in parser._actions:
        if action.dest in ACCEPTED:
            action.help = f"Accepted, and changes nothing: {ACCEPTED[action.dest]}."
    parser.set_defaults(**{_NOT_SETTINGS: tuple(not_settings)})


def refuse_unsupported(args: argparse.Namespace) -> None:
    """Refuse, in one line naming it and why, a flag of tau2's that is no setting tau2-a2a honours."""
    for dest in getattr(args, _NOT_SETTINGS, ()):
        if getattr(args, dest, None) not in (None, False):
            raise ConfigError(f"{flag_of(dest)} {REFUSED.get(dest, UNKNOWN)}.")


def settings_given(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the flags set, by RunSettings' names (a command without some flag leaves its default)."""
    return {name: getattr(args, name) for name in SETTINGS if hasattr(args, name)}


def flag_of(dest: str) -> str:
    """A flag as typed: `audio_native` -> `--audio-native`."""
    return "--" + dest.replace("_", "-")
