"""Commands that run no simulation import neither tau2, LiteLLM, Ray nor ADK (seconds of CPU each).

Each command runs in a fresh interpreter, as `tau2-a2a` would, and says at its
end which of those packages its process imported; the test names them, and the
tau2-a2a modules that pulled them in are found with `python -X importtime`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, free_port
from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card
from tau2_a2a.tau2bench.run.layout import results_path
from tests.support.runs import run_native_oracle

pytestmark = pytest.mark.nvidia

HEAVY = ("tau2", "litellm", "ray", "google.adk", "google.genai")

# Runs the command line in this interpreter, then writes which HEAVY packages it imported, and its exit code.
PROBE = """
import json, sys
heavy, out, argv = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3:]
from tau2_a2a.cli import main
try:
    code = main(argv)
except SystemExit as stop:
    code = stop.code
with open(out, "w") as handle:
    json.dump({"imported": [name for name in heavy if name in sys.modules], "code": code}, handle)
"""


def imported_by(argv: list[str], tmp_path: Path) -> tuple[list[str], object]:
    """The heavy packages `tau2-a2a ARGV` imports in a fresh interpreter, and its exit code."""
    out = tmp_path / "imported.json"
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(HEAVY), str(out), *argv], capture_output=True,
                          text=True, timeout=600, env={**_environment(), "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert out.exists(), f"tau2-a2a {' '.join(argv)} did not finish: {done.stderr[-2000:]}"
    found = json.loads(out.read_text())
    return found["imported"], found["code"]


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "TAU2_A2A_AUTH_TOKEN"}


def culprits(argv: list[str], package: str) -> str:
    """The tau2-a2a modules on the way to `package`'s first import, from -X importtime's tree (outermost last)."""
    return chain_to(package, "-c", PROBE, json.dumps(HEAVY), "/dev/null", *argv)


def chain_to(package: str, *args: str) -> str:
    """The tau2-a2a modules on the way to `package`'s first import by `python ARGS` (outermost last)."""
    done = subprocess.run([sys.executable, "-X", "importtime", *args],
                          capture_output=True, text=True, timeout=600, env=_environment())
    lines = [line.split("|")[-1] for line in done.stderr.splitlines() if line.startswith("import time:")]
    for index, line in enumerate(lines):
        if line.strip() == package:
            depth = len(line) - len(line.lstrip())
            chain = []
            for later in lines[index + 1:]:  # a module's line follows those of the modules it imported
                if len(later) - len(later.lstrip()) < depth and later.strip().startswith("tau2_a2a"):
                    chain.append(later.strip())
                    depth = len(later) - len(later.lstrip())
            return " <- ".join(chain)
    return "?"


def assert_light(argv: list[str], tmp_path: Path, code: int = 0) -> None:
    imported, exit_code = imported_by(argv, tmp_path)
    said = [f"{name} (by {culprits(argv, name)})" for name in imported]
    assert said == [], f"tau2-a2a {' '.join(argv)} imported " + "; ".join(said)
    assert exit_code == code


HELP = [["--help"], *([command, "--help"] for command in ("card", "agent", "demo", "report", "serve", "merge")),
        ["agent", "oracle", "--help"], ["agent", "llm", "--help"], ["agent", "adk", "--help"]]


@pytest.mark.parametrize("argv", HELP, ids=" ".join)
def test_help_imports_nothing_heavy(argv: list[str], tmp_path: Path) -> None:
    assert_light(argv, tmp_path)


@pytest.mark.parametrize("argv", [["card"], ["report"], ["merge", "a.json"], ["agent", "oracle", "--port", "x"],
                                  ["frobnicate"]], ids=" ".join)
def test_argument_errors_import_nothing_heavy(argv: list[str], tmp_path: Path) -> None:
    assert_light(argv, tmp_path, code=2)


@pytest.fixture(scope="module")
def oracle_url() -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with BackgroundServer(a2a_app(OracleExecutor(), oracle_card(url)), port=port):
        yield url


def test_card_imports_nothing_heavy(oracle_url: str, tmp_path: Path) -> None:
    assert_light(["card", oracle_url], tmp_path)


def test_report_imports_nothing_heavy(tmp_path: Path) -> None:
    run_native_oracle(tmp_path / "runs", task_ids=["0"])
    results = results_path("native", tmp_path / "runs")
    assert_light(["report", str(results), "--out", str(tmp_path / "report.html"), "--resamples", "100"], tmp_path)
    assert (tmp_path / "report.html").exists()


def test_the_probe_sees_a_command_that_imports_tau2(tmp_path: Path) -> None:
    """A command that runs simulations does import tau2: the probe would see a light command that did."""
    argv = ["run", "--domain", "airline", "--task-ids", "none-such", "--results-dir", str(tmp_path / "results")]
    imported, code = imported_by(argv, tmp_path)
    assert ("tau2" in imported, code) == (True, 2)
    assert culprits(argv, "tau2").startswith("tau2_a2a.tau2bench.seam.imports <- ")


# tau2's own `run` flags, which run and ab share, are described once and cached (cli/tau2_flags_cache.py): the
# first command that needs them imports tau2 to describe them, the next ones read the description. A run's own
# checks (counts, its domain, the A2A flags) are made before it imports tau2.
TAU2_FLAGS = [["run", "--help"], ["ab", "--help"], ["ab", "--domain", "airline"], ["run", "--max-steps", "x"],
              ["run", "airline", "--num-trials", "0"], ["run", "banking"],
              ["run", "airline", "--a2a-endpoint", "http://127.0.0.1:9", "--a2a-timeout", "nan"]]


@pytest.mark.parametrize("argv", TAU2_FLAGS, ids=" ".join)
def test_tau2s_flags_once_described_need_no_tau2(argv: list[str], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    code = 0 if "--help" in argv else 2
    imported, exit_code = imported_by(argv, tmp_path)
    assert ("tau2" in imported, exit_code) == (True, code)  # none cached yet: tau2's parser describes them
    assert_light(argv, tmp_path, code=code)


# A request's schema, bounds, defaults and AgentBeats keys need no tau2: the service reads tau2 when it checks
# a request's domain and tasks, and when it runs one.
REQUEST_MODULES = ("tau2_a2a.service.request", "tau2_a2a.service.assessment", "tau2_a2a.service.tool_specs",
                   "tau2_a2a.service.arguments")


@pytest.mark.parametrize("module", REQUEST_MODULES)
def test_the_requests_modules_import_nothing_heavy(module: str) -> None:
    code = f"import json, sys, {module}; print(json.dumps([n for n in {list(HEAVY)!r} if n in sys.modules]))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env=_environment())
    assert done.returncode == 0, done.stderr[-2000:]
    imported = json.loads(done.stdout.splitlines()[-1])
    said = [f"{name} (by {chain_to(name, '-c', f'import {module}')})" for name in imported]
    assert said == [], f"import {module} imported " + "; ".join(said)


# A program that imports the package, its Python API or the service's app pays for tau2 when it runs something.
LIBRARY_MODULES = ("tau2_a2a", "tau2_a2a.api", "tau2_a2a.service", "tau2_a2a.service.app")


@pytest.mark.parametrize("module", LIBRARY_MODULES)
def test_importing_the_library_or_the_service_imports_no_tau2(module: str) -> None:
    code = f"import json, sys, {module}; print(json.dumps([n for n in ('tau2', 'litellm') if n in sys.modules]))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env=_environment())
    assert done.returncode == 0 and "Exception ignored" not in done.stderr, done.stderr[-2000:]
    imported = json.loads(done.stdout.splitlines()[-1])
    said = [f"{name} (by {chain_to(name, '-c', f'import {module}')})" for name in imported]
    assert said == [], f"import {module} imported " + "; ".join(said)
