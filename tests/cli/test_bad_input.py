"""Bad input to `tau2-a2a run` gets one clear line and a truthful exit code, never a traceback.

The command-line cases are real runs of the installed command against the oracle agent; the
property test checks the flags' parsing and validation (what a run does first) over any value.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tau2_a2a.cli import parse_run_args
from tau2_a2a.client.config import ConfigError
from tau2_a2a.tau2bench.run.layout import metrics_path, results_path
from testbed.hostile_agent import HostileAgent, Hostility
from tests.support.cli import run_cli
from tests.support.distributions import DOMAIN_LIST
from tests.support.executors import OracleLike, agent_app
from tests.support.middleware import FailFirst, NullResult, middleware
from tests.support.records import records_of
from tests.support.runs import Serve, run_a2a


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    process = run_cli(["run", *args])
    stdout, stderr = process.communicate(timeout=300)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def a2a_run(url: str, results: Path, *extra: str, domain: str = "airline") -> list[str]:
    return [domain, "--agent", "a2a_agent", "--a2a-endpoint", url, "--user", "scripted_user",
            "--results-dir", str(results), "--save-to", "run", *extra]


@pytest.mark.parametrize(("domain", "extra", "line"), [
    ("banking", [], f"error: Unknown domain 'banking': tau2 knows {DOMAIN_LIST}."),
    ("airline", ["--num-tasks", "0"], "error: --num-tasks must be between 1 and 1000000, got 0."),
    ("airline", ["--num-tasks", "-1"], "error: --num-tasks must be between 1 and 1000000, got -1."),
    ("airline", ["--num-trials", "0"], "error: --num-trials must be between 1 and 1000000, got 0."),
    ("airline", ["--a2a-timeout", "nan"],
     "error: --a2a-timeout must be a number of seconds above 0 and at most 86400, got nan."),
    ("airline", ["--a2a-timeout", "inf"],
     "error: --a2a-timeout must be a number of seconds above 0 and at most 86400, got inf."),
    ("airline", ["--num-tasks", "two"],
     "error: argument --num-tasks: invalid int value: 'two' (see tau2-a2a run --help)"),
    ("airline", ["--a2a-price-model", "gpt-99"],
     "error: --a2a-price-model gpt-99: LiteLLM's local cost map has no price for this model; name one it prices, "
     "as LiteLLM spells it (e.g. gpt-4.1-2025-04-14, claude-sonnet-4-20250514, gemini/gemini-2.5-flash)."),
    ("airline", ["--task-ids", "9999"],
     "error: No tasks to run in airline: Not all tasks were found for task set airline - base: {'9999'}. "
     "Check --task-ids and --task-split-name."),
])
def test_a_bad_flag_gets_one_line_and_exit_2(domain: str, extra: list[str], line: str, oracle_url: str,
                                             tmp_path: Path) -> None:
    done = run(a2a_run(oracle_url, tmp_path, *extra, domain=domain))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [line]
    assert list(tmp_path.iterdir()) == []  # nothing ran, nothing written


def test_a_results_directory_that_cannot_be_written_is_refused_before_any_simulation(oracle_url: str,
                                                                                   tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    done = run(a2a_run(oracle_url, blocker / "results", "--task-ids", "0"))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: Cannot write results in {blocker / 'results'} (Not a directory); pass a --results-dir you can "
        "write to."]
    assert "A2A agent:" not in done.stdout  # refused before the agent was even asked


def test_an_interface_that_answers_501_fails_the_check_before_any_simulation(serve: Serve, tmp_path: Path) -> None:
    """The card's JSON-RPC URL answers 501 Not Implemented: nothing serves the interface, so no run starts."""
    server = serve(lambda url: agent_app(OracleLike(), url, [
        middleware(FailFirst, status=501, count=1000, rpc_method="GetTask")]))
    done = run(a2a_run(server.url, tmp_path, "--task-ids", "0"))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: The agent card at {server.url} names {server.url} for JSON-RPC, but that URL answers HTTP 501: "
        "it does not serve JSON-RPC. Fix the url in the agent's card, or choose another of its interfaces with "
        "--a2a-transport."]
    assert not results_path("run", tmp_path).exists()


def test_a_null_json_rpc_result_is_a_malformed_reply_with_its_reason(serve: Serve, tmp_path: Path) -> None:
    server = serve(lambda url: agent_app(OracleLike(), url, [middleware(NullResult)]))
    outcome = run_a2a(server.url, tmp_path, task_ids=["0"])
    [failed] = [r for r in records_of(outcome, "0") if r["error"]]
    assert failed["error"] == "malformed-reply"
    assert failed["error_message"] == (
        f"SendMessage to {server.url}: the reply does not hold a valid A2A result (null where an A2A object "
        "belongs, e.g. a JSON-RPC result of null)")
    assert outcome.metrics["run"]["errors_by_category"] == {"malformed-reply": 1}


# -- any value of the numeric flags: a run, or one clear line ---------------------------------------------------

BOUNDS = {"--num-tasks": (1, 1_000_000), "--num-trials": (1, 1_000_000), "--max-steps": (1, 1_000_000),
          "--max-concurrency": (1, 1_000_000), "--seed": (-(2**63), 2**63 - 1)}
AGENT = ["airline", "--agent", "a2a_agent", "--a2a-endpoint", "http://127.0.0.1:9"]

numbers = st.one_of(
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["nan", "inf", "-inf", "1e309", "0x10", " 5", "5 ", "", "1_000", "٣", "+3", "-0", "1e3"]),
    st.text(max_size=8),
).map(str)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flag=st.sampled_from([*BOUNDS, "--a2a-timeout"]), value=numbers)
def test_any_value_of_a_numeric_flag_is_taken_or_refused_in_one_line(flag: str, value: str, capsys) -> None:
    try:
        args = parse_run_args([*AGENT, f"{flag}={value}"])
    except SystemExit as exit:  # argparse: not a number at all
        assert exit.code == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.endswith("\n") and err.count("\n") == 1, err
        return
    except ConfigError as error:  # a number no run can use
        assert "\n" not in str(error) and str(error).startswith(flag), str(error)
        return
    taken = getattr(args, flag[2:].replace("-", "_"))
    if flag == "--a2a-timeout":
        assert math.isfinite(taken) and 0 < taken <= 86400
    else:
        low, high = BOUNDS[flag]
        assert low <= taken <= high


# -- an untrusted agent, and URLs and flags that would mislead the run --------------------------------------------

SECRET = "hunter2-6f1d"


@pytest.mark.parametrize("endpoint, origin", [
    (f"http://alice:{SECRET}@127.0.0.1:9", "http://127.0.0.1:9"),
    (f"http://127.0.0.1:9/agent?token={SECRET}", "http://127.0.0.1:9/..."),
    (f"http://127.0.0.1:9/#{SECRET}", "http://127.0.0.1:9/..."),
])
def test_an_endpoint_carrying_a_secret_is_refused_in_one_line_that_shows_only_its_origin(
        endpoint: str, origin: str, tmp_path: Path) -> None:
    done = run(a2a_run(endpoint, tmp_path))
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: --a2a-endpoint {origin} must not carry a "), line
    assert "--a2a-auth-token or TAU2_A2A_AUTH_TOKEN" in line
    assert SECRET not in done.stdout + done.stderr and "alice" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_a2a_flag_without_agent_runs_the_a2a_agent(oracle_url: str, tmp_path: Path) -> None:
    """Never tau2's llm_agent (and its LLM bill) in place of the agent the flags name."""
    done = run(["airline", "--a2a-endpoint", oracle_url, "--user", "scripted_user", "--task-ids", "0",
                "--results-dir", str(tmp_path), "--save-to", "run"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"A2A agent: tau2 oracle at {oracle_url}" in done.stdout
    assert json.loads(results_path("run", tmp_path).read_text())["info"]["agent_info"]["implementation"] == "a2a_agent"


@pytest.mark.parametrize("flag", [["--a2a-endpoint", "http://127.0.0.1:9"], ["--a2a-streaming"]])
def test_an_a2a_flag_beside_another_agent_is_refused_in_one_line(flag: list[str], tmp_path: Path) -> None:
    done = run(["airline", "--agent", "llm_agent", *flag, "--results-dir", str(tmp_path)])
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: {flag[0]} is for --agent a2a_agent, but --agent llm_agent was given: drop --agent llm_agent to "
        "evaluate the A2A agent, or drop the --a2a-* flags."]
    assert list(tmp_path.iterdir()) == []


def test_a_flood_of_tool_calls_ends_each_simulation_and_the_run_says_so(tmp_path: Path) -> None:
    with HostileAgent(Hostility(flood=10_000)) as agent:
        done = run(a2a_run(agent.url, tmp_path, "--task-ids", "0", "1"))
    assert done.returncode == 3, done.stderr[-3000:]
    assert done.stderr.splitlines()[-1] == (
        f"2 of 2 simulations ended with A2A errors (limit=2): they score 0; see {metrics_path(results_path('run', tmp_path))}")
    assert results_path("run", tmp_path).stat().st_size < 200_000


def test_a_400_character_card_name_makes_a_bounded_results_file_name(tmp_path: Path) -> None:
    name = "Agent " + "x" * 394
    with HostileAgent(Hostility(name=name)) as agent:
        done = run(["airline", "--a2a-endpoint", agent.url, "--user", "scripted_user", "--task-ids", "0",
                    "--results-dir", str(tmp_path)])  # no --save-to: the file is named after the run
    assert done.returncode == 0, done.stderr[-3000:]
    [results] = [path for path in tmp_path.iterdir()
                 if not path.name.endswith(("_a2a_metrics.json", "_results.json", "_termination_summary.json"))]
    slug = re.search(r"_a2a_agent_(a2a-[^_]+)_scripted_user_", results.name)
    assert slug is not None, results.name
    assert re.fullmatch(r"a2a-Agent-x{33}-[0-9a-f]{8}", slug[1]), slug[1]  # 48 characters
    assert len(results.name) < 160


HOSTILE_TEXT = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\rFAKE LINE\nerror: all good\x9b31m\x00"
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mred\\rFAKE LINE\\nerror: all good\\x9b31m\\x00"


def no_control(text: str) -> bool:
    """Nothing the hostile text holds reaches the terminal raw: no ESC, BEL, CR, C1 CSI or NUL from it."""
    return not any(raw in text for raw in ("\x1b]0;pwned", "\x07", "\x1b[2J", "\rFAKE", "\x9b", "\x00"))


def test_a_cards_escape_sequences_are_shown_as_text_by_card(tmp_path: Path) -> None:
    with HostileAgent(Hostility(name=HOSTILE_TEXT, description=HOSTILE_TEXT)) as agent:
        process = run_cli(["card", agent.url])
        stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    assert no_control(stdout + stderr)
    assert f"  name:        {SHOWN}" in stdout.splitlines()
    assert f"  description: {SHOWN}" in stdout.splitlines()


def test_an_agents_escape_sequences_reach_the_run_s_terminal_as_text(tmp_path: Path) -> None:
    """In the card's name (the banner), a task's status message and an error body (the log lines), outside a git
    checkout, where tau2's git lookup must leave nothing on stderr."""
    said: dict[str, tuple[str, str]] = {}
    with HostileAgent(Hostility(name=HOSTILE_TEXT, fail_text=HOSTILE_TEXT)) as failing, \
            HostileAgent(Hostility(error_body=HOSTILE_TEXT)) as erring:
        for kind, agent in (("failing", failing), ("erring", erring)):
            process = run_cli(["run", "airline", "--a2a-endpoint", agent.url, "--user", "scripted_user",
                               "--task-ids", "0", "--results-dir", str(tmp_path), "--save-to", kind], cwd=tmp_path)
            stdout, stderr = process.communicate(timeout=300)
            assert process.returncode == 3, stderr[-3000:]
            assert no_control(stdout + stderr), (stdout + stderr)[-3000:]
            assert "not a git repository" not in stderr
            said[kind] = stdout, stderr
    assert f"A2A agent: {SHOWN} at {failing.url} (A2A 1.0 over JSON-RPC)" in said["failing"][0].splitlines()
    assert f"as TASK_STATE_FAILED: {SHOWN}" in said["failing"][1]
    # an error body's whitespace (CR, newline) is folded into spaces; the rest is shown escaped
    assert ("failed with HTTP 400: \\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mred FAKE LINE error: all good\\x9b31m\\x00"
            in said["erring"][1])
