"""`run` and `ab` take tau2's flags from a description cached per tau2 distribution and version: the parser it
builds is tau2's, word for word, on both distributions, and a description made for another tau2 or another
tau2-a2a is not used.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from tau2_a2a.cli import build_parser, tau2_flags, tau2_flags_cache

pytestmark = pytest.mark.nvidia


def command_parser(command: str) -> argparse.ArgumentParser:
    commands = next(action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = commands.build(command)  # type: ignore[attr-defined]
    return parser


def without_description(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every parser from tau2's own, as before the cache."""
    monkeypatch.setattr(tau2_flags, "add_tau2_flags", tau2_flags_cache.add_live)


def described_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A parser from the cached description alone: describing tau2's flags again fails the test."""
    def no_new_description() -> None:
        raise AssertionError("tau2's flags were described again, though the cache held them")
    monkeypatch.setattr(tau2_flags_cache, "make", no_new_description)


@pytest.fixture(autouse=True)
def empty_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("command", ["run", "ab"])
def test_the_cached_flags_make_tau2s_parser_word_for_word(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    first = command_parser(command)  # describes tau2's flags and keeps the description
    assert tau2_flags_cache.cache_path().exists()
    with monkeypatch.context() as patched:
        described_only(patched)
        cached = command_parser(command)
    with monkeypatch.context() as patched:
        without_description(patched)
        tau2s = command_parser(command)
    assert cached.format_help() == tau2s.format_help()
    assert first.format_help() == tau2s.format_help()
    assert tau2_flags_cache.shape(cached) == tau2_flags_cache.shape(tau2s)
    words = ["--domain", "airline", "--num-trials", "4", "--agent-llm-args", '{"temperature": 0.5}',
             "--task-ids", "1", "2", *(["--model", "m"] if command == "ab" else [])]
    assert cached.parse_args(words) == tau2s.parse_args(words)


def test_a_description_of_another_tau2_or_tau2_a2a_is_made_again(monkeypatch: pytest.MonkeyPatch) -> None:
    command_parser("run")
    path = tau2_flags_cache.cache_path()
    kept = json.loads(path.read_text())
    # another version; tau2's own files edited in place (its registry of domains, its parser); another tau2-a2a
    for stale in ({**kept["key"], "version": "0.0.1"}, {**kept["key"], "tau2": "an edited tau2"},
                  {**kept["key"], "code": "another tau2-a2a"}):
        path.write_text(json.dumps({**kept, "key": stale, "flags": []}))  # would have no flag of tau2's
        help_text = command_parser("run").format_help()
        assert "--num-trials" in help_text
        assert json.loads(path.read_text()) == kept
    path.write_text("{not json")
    assert "--num-trials" in command_parser("run").format_help()
    assert json.loads(path.read_text()) == kept


def test_editing_tau2_in_place_changes_the_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A checkout of tau2 edited in place (a domain added to its registry) keeps its version, not its key."""
    registry = tmp_path / "registry.py"
    registry.write_text("DOMAINS = ['airline']\n")
    found = SimpleNamespace(submodule_search_locations=[str(tmp_path)])
    monkeypatch.setattr(tau2_flags_cache.importlib.util, "find_spec", lambda name: found if name == "tau2" else None)
    before = tau2_flags_cache.key()
    registry.write_text("DOMAINS = ['airline', 'hotel']\n")
    assert tau2_flags_cache.key()["tau2"] != before["tau2"]
    assert {**tau2_flags_cache.key(), "tau2": before["tau2"]} == before


def test_a_cache_that_cannot_be_written_leaves_tau2s_flags(monkeypatch: pytest.MonkeyPatch, empty_cache: Path) -> None:
    (empty_cache / "tau2-a2a").write_text("a file where the cache's directory would be")
    with monkeypatch.context() as patched:
        without_description(patched)
        tau2s = command_parser("run").format_help()
    assert command_parser("run").format_help() == tau2s
    assert not tau2_flags_cache.cache_path().exists()


def test_a_flag_it_cannot_describe_leaves_the_parser_to_tau2(monkeypatch: pytest.MonkeyPatch) -> None:
    stock = tau2_flags_cache.add_live

    def tau2_with_a_new_kind_of_flag(parser: argparse.ArgumentParser) -> None:
        stock(parser)
        parser.add_argument("--weights", type=lambda text: [float(word) for word in text.split(",")])

    monkeypatch.setattr(tau2_flags_cache, "add_live", tau2_with_a_new_kind_of_flag)
    args = command_parser("run").parse_args(["--weights", "1,2.5"])
    assert args.weights == [1.0, 2.5]
    assert not tau2_flags_cache.cache_path().exists()


def test_a_default_from_the_environment_is_not_written_down(monkeypatch: pytest.MonkeyPatch) -> None:
    """It may be a secret, and would be stale once the environment changes."""
    stock = tau2_flags_cache.add_live
    monkeypatch.setenv("TAU2_TEST_SECRET", "sk-test-0123456789")

    def tau2_with_a_default_from_the_environment(parser: argparse.ArgumentParser) -> None:
        stock(parser)
        parser.add_argument("--api-key", default=os.environ["TAU2_TEST_SECRET"])

    monkeypatch.setattr(tau2_flags_cache, "add_live", tau2_with_a_default_from_the_environment)
    assert command_parser("run").parse_args([]).api_key is None  # a flag tau2-a2a does not know: no default
    assert not tau2_flags_cache.cache_path().exists()
