"""The installed tau2's `run` flags as data, cached, so that `run --help`, `ab --help` and their argument errors
need no tau2 (importing it takes seconds of CPU; reading the cache, milliseconds).

The description is made on first need from tau2's own parser (tau2-a2a's agents registered, as a run has
them), kept under $XDG_CACHE_HOME/tau2-a2a (~/.cache/tau2-a2a) per tau2 distribution and version, and used
only while both, and the code that shapes those flags (the seam, this module), are those that made it. It is
kept only if the parser it rebuilds prints tau2's help, word for word; a flag it cannot describe (a type or an
action of tau2's it does not know, a default read from the environment) leaves every parser to tau2's own,
uncached.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import tau2_a2a
from tau2_a2a.tau2bench.seam.installed import DISTRIBUTION, VERSION

# The types and actions a described flag may have, by name.
TYPES: dict[str, Any] = {"str": str, "int": int, "float": float, "json.loads": json.loads}
ACTIONS: dict[type[argparse.Action], str] = {
    argparse._StoreAction: "store", argparse._StoreTrueAction: "store_true",
    argparse._StoreFalseAction: "store_false", argparse._StoreConstAction: "store_const",
}
_FIELDS = ("dest", "nargs", "const", "default", "choices", "required", "help", "metavar")


class Undescribable(Exception):
    """A flag of tau2's this module cannot write down: its parser is then built from tau2 itself."""


def add_tau2_flags(parser: argparse.ArgumentParser) -> None:
    """tau2's `run` flags on `parser`: from the cached description, made now if there is none that fits."""
    description = cached() or make()
    if description is None:
        add_live(parser)
    else:
        rebuild(parser, description)


def add_live(parser: argparse.ArgumentParser) -> None:
    """tau2's flags from its own parser: tau2-a2a's agents and user registered, so that --agent offers them."""
    from tau2_a2a.tau2bench.seam.distribution import add_run_args
    from tau2_a2a.tau2bench.seam.hooks import register

    register()
    add_run_args(parser)


def cached() -> dict[str, Any] | None:
    """The description kept for the installed tau2 and this code, or None."""
    current = key()
    try:
        description: dict[str, Any] = json.loads(cache_path(current).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return description if isinstance(description, dict) and description.get("key") == current else None


def domains() -> list[str] | None:
    """The domains tau2's --domain offers, as described (None with no description kept): a run's domain is
    checked before tau2 is imported."""
    description = cached()
    if description is None:
        return None
    return next((list(flag["choices"]) for flag in description["flags"]
                 if "--domain" in flag["option_strings"] and flag["choices"]), None)


def make() -> dict[str, Any] | None:
    """The description of tau2's flags, kept for next time if it rebuilds tau2's parser exactly; None if it cannot
    be written down."""
    live = argparse.ArgumentParser(prog="tau2", add_help=False)
    add_live(live)
    try:
        description = json.loads(json.dumps(describe(live)))  # as it will be read back
    except (Undescribable, TypeError, ValueError):  # TypeError, ValueError: a default JSON cannot hold
        return None
    rebuilt = argparse.ArgumentParser(prog="tau2", add_help=False)
    rebuild(rebuilt, description)
    if rebuilt.format_help() != live.format_help() or shape(rebuilt) != shape(live):
        return None
    _write(description)
    return description


def shape(parser: argparse.ArgumentParser) -> list[object]:
    """All that parsing with `parser` depends on: each flag's class and settings, its group, the defaults."""
    flags: list[object] = [(type(action), action.option_strings, action.type,
                            *(getattr(action, name) for name in _FIELDS)) for action in parser._actions]
    groups = [(group.required, [action.dest for action in group._group_actions])
              for group in parser._mutually_exclusive_groups]
    return [flags, groups, parser._defaults]


def describe(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """Every flag of `parser` (one made with add_help=False) and its defaults, as JSON."""
    if len(parser._action_groups) != 2:
        raise Undescribable("argument groups")
    groups = {id(action): index for index, group in enumerate(parser._mutually_exclusive_groups)
              for action in group._group_actions}
    flags = []
    for action in parser._actions:
        kind = ACTIONS.get(type(action))
        names = [name for name, function in TYPES.items() if function is action.type]
        if kind is None or (action.type is not None and not names):
            raise Undescribable(f"{action.dest}: {type(action).__name__}, type {action.type!r}")
        flags.append({"kind": kind, "option_strings": action.option_strings, "type": names[0] if names else None,
                      "group": groups.get(id(action)), **{name: getattr(action, name) for name in _FIELDS}})
    exclusive = [group.required for group in parser._mutually_exclusive_groups]
    description = {"key": key(), "flags": flags, "exclusive": exclusive, "defaults": parser._defaults}
    _refuse_environment(json.dumps(description))
    return description


def _refuse_environment(text: str) -> None:
    """A value of the environment in the description (a default tau2 read from it) may be a secret, and would be
    stale once the environment changes: such flags are left to tau2's parser."""
    for name, value in os.environ.items():
        if len(value) >= 8 and json.dumps(value)[1:-1] in text:
            raise Undescribable(f"a default is ${name}'s value")


def rebuild(parser: argparse.ArgumentParser, description: dict[str, Any]) -> None:
    """The described flags and defaults, added to `parser` in tau2's order (its mutually exclusive groups too)."""
    exclusive = [parser.add_mutually_exclusive_group(required=required) for required in description["exclusive"]]
    for flag in description["flags"]:
        container = parser if flag["group"] is None else exclusive[flag["group"]]
        settings = {name: flag[name] for name in _FIELDS if name != "dest" or flag["option_strings"]}
        if flag["kind"] != "store":
            settings = {name: value for name, value in settings.items()
                        if name in ("dest", "default", "required", "help")
                        or (name == "const" and flag["kind"] == "store_const")}
        elif flag["type"] is not None:
            settings["type"] = TYPES[flag["type"]]
        names = flag["option_strings"] or [flag["dest"]]
        container.add_argument(*names, action=flag["kind"], **settings)
    parser.set_defaults(**description["defaults"])


def key() -> dict[str, str]:
    """What the description depends on: the installed tau2 (its version, and the files at the top of its package,
    where its parser and its registry of domains live: a checkout of tau2 edited in place keeps its version), and
    tau2-a2a's code that adds to or reads its flags."""
    digest = hashlib.sha256()
    package = Path(tau2_a2a.__file__).parent
    for path in sorted((package / "tau2bench").rglob("*.py")) + [Path(__file__)]:
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return {"distribution": DISTRIBUTION, "version": VERSION, "code": digest.hexdigest(), "tau2": tau2_files()}


def tau2_files() -> str:
    """Each top-level module of the installed tau2 by name, size and modification time (found, not imported)."""
    spec = importlib.util.find_spec("tau2")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    stamps = sorted(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}"
                    for location in locations for path in Path(location).glob("*.py")
                    for stat in [path.stat()])
    return hashlib.sha256("\n".join(stamps).encode()).hexdigest()


def cache_path(current: dict[str, str] | None = None) -> Path:
    """One file per key: two checkouts of tau2-a2a (or two tau2s) side by side keep a description each, instead
    of making theirs again each time the other ran."""
    digest = hashlib.sha256(json.dumps(current or key(), sort_keys=True).encode()).hexdigest()[:16]
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base, "tau2-a2a", f"run-flags-{DISTRIBUTION}-{VERSION}-{digest}.json")


def _write(description: dict[str, Any]) -> None:
    """Kept whole or not at all (another process may read it meanwhile); a cache that cannot be written is
    skipped: the next command describes the flags again."""
    path = cache_path(description["key"])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump(description, file)
        os.replace(name, path)
    except OSError:
        Path(name).unlink(missing_ok=True)
