"""Upstream tau2-bench v1.0.1's newer text domains over A2A: banking_knowledge and telecom-workflow.

(The oracle over A2A against upstream's own run, on a sample of each domain's
task shapes, is in test_upstream.py.) `--retrieval-config`
reaches upstream (the tools and policy the agent is sent, the results file),
and so does `--timeout`; a value no run can use is refused in one line before
anything runs; the service lists both domains with no API key.
bench/oracle_fidelity.py runs every task (docs/domains.md has the figures).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest
from a2a.server.agent_execution import RequestContext
from a2a.server.events import EventQueue

from tau2_a2a.client.config import A2AConfig
from tau2_a2a.errors import ConfigError
from tau2_a2a.runner.run import evaluate
from tau2_a2a.runner.settings import RunSettings
from tau2_a2a.tau2bench.run.layout import results_path
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, UPSTREAM, Results, load_tasks
from tests.support.cli import run_cli
from tests.support.executors import OracleLike, Seen, agent_app
from tests.support.runs import FAST, Serve, run_a2a

pytestmark = [
    pytest.mark.upstream,
    pytest.mark.skipif(DISTRIBUTION != UPSTREAM, reason=f"needs upstream tau2-bench; {DISTRIBUTION} is installed"),
]

KNOWLEDGE = "banking_knowledge"
OFFLINE_RETRIEVAL = "bm25_grep"  # BM25 search and grep over the knowledge base: no embeddings, no network


def _tools_and_policy_seen(serve: Serve, tmp_path: Path, retrieval_config: str) -> tuple[set[str], str, dict]:
    """Run task_001 against a recording oracle with `retrieval_config` from the command line: the tool names
    and the policy the agent was sent first, and the results file."""
    agent = OracleLike()
    url = serve(lambda url: agent_app(agent, url)).url
    process = run_cli(["run", KNOWLEDGE, "--agent", "a2a_agent", "--a2a-endpoint", url, "--user", "scripted_user",
                       "--task-ids", "task_001", "--retrieval-config", retrieval_config,
                       "--results-dir", str(tmp_path), "--save-to", retrieval_config])
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
    first = agent.seen[0].turn
    tools = {tool["function"]["name"] for tool in first.tools or []}
    return tools, first.system or "", json.loads(results_path(retrieval_config, tmp_path).read_text())


def test_the_retrieval_config_reaches_upstream(serve: Serve, tmp_path: Path) -> None:
    bm25_tools, bm25_policy, bm25_file = _tools_and_policy_seen(serve, tmp_path, "bm25_grep")
    full_tools, full_policy, full_file = _tools_and_policy_seen(serve, tmp_path, "full_kb")

    assert {"KB_search", "grep"} <= bm25_tools  # bm25_grep searches the knowledge base with tools
    assert not {"KB_search", "grep"} & full_tools  # full_kb puts the whole knowledge base in the policy
    assert bm25_tools - full_tools == {"KB_search", "grep"}
    assert len(full_policy) > 10 * len(bm25_policy)
    assert bm25_file["info"]["retrieval_config"] == "bm25_grep"
    assert full_file["info"]["retrieval_config"] == "full_kb"
    for results in (bm25_file, full_file):
        assert [(s["task_id"], s["reward_info"]["reward"]) for s in results["simulations"]] == [("task_001", 1.0)]


def test_a_resume_with_another_retrieval_config_is_refused(oracle_url: str, tmp_path: Path) -> None:
    run_a2a(oracle_url, tmp_path, KNOWLEDGE, task_ids=["task_001"], save_to="kb", retrieval_config="bm25_grep")
    with pytest.raises(ConfigError, match=r"retrieval config bm25_grep in the file, full_kb now"):
        run_a2a(oracle_url, tmp_path, KNOWLEDGE, task_ids=["task_001"], save_to="kb", retrieval_config="full_kb")
    assert len(Results.load(results_path("kb", tmp_path)).simulations) == 1


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    process = run_cli(["run", *args], cwd=cwd)
    stdout, stderr = process.communicate(timeout=300)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.mark.parametrize(("domain", "extra", "line"), [
    (KNOWLEDGE, ["--retrieval-config", "embeddings"],
     "error: argument --retrieval-config: invalid choice: 'embeddings' (choose from "),
    ("airline", ["--retrieval-config", "bm25_grep"],
     "error: --retrieval-config applies to the banking_knowledge domain only; leave it out for airline."),
    (KNOWLEDGE, ["--retrieval-config-kwargs", "[10]"],
     "error: --retrieval-config-kwargs must be a JSON object, e.g. '{\"top_k\": 10}', got [10]."),
    ("airline", ["--timeout", "0"],
     "error: --timeout must be a finite number of seconds, above 0 and at most 86400, got 0.0."),
    ("airline", ["--retry-delay", "-1"],
     "error: --retry-delay must be a finite number of seconds, 0 or more and at most 86400, got -1.0."),
    ("airline", ["--retry-delay", "1e300"],
     "error: --retry-delay must be a finite number of seconds, 0 or more and at most 86400, got 1e+300."),
    ("airline", ["--timeout", "86401"],
     "error: --timeout must be a finite number of seconds, above 0 and at most 86400, got 86401.0."),
])
def test_a_bad_upstream_setting_gets_one_line_and_exit_2(domain: str, extra: list[str], line: str,
                                                         tmp_path: Path) -> None:
    """Refused before the agent is even asked: the endpoint here serves nothing."""
    done = run([domain, "--agent", "a2a_agent", "--a2a-endpoint", "http://127.0.0.1:9", "--user", "scripted_user",
                "--results-dir", str(tmp_path / "results"), *extra], cwd=tmp_path)
    assert done.returncode == 2
    [shown] = done.stderr.splitlines()
    assert shown.startswith(line), shown
    if "invalid choice" in line:
        assert "'bm25_grep'" in shown and "'full_kb'" in shown and "'golden_retrieval'" in shown
    assert not (tmp_path / "results").exists()


def test_an_unknown_retrieval_config_from_python_names_the_known_ones(tmp_path: Path) -> None:
    settings = RunSettings(domain=KNOWLEDGE, a2a=A2AConfig(endpoint="http://127.0.0.1:9", retry=FAST),
                           user="scripted_user", retrieval_config="embeddings", results_dir=str(tmp_path))
    with pytest.raises(ConfigError) as refused:
        evaluate(settings)
    message = str(refused.value)
    assert message.startswith("Unknown --retrieval-config 'embeddings': upstream tau2-bench knows ")
    assert {"bm25_grep", "full_kb", "golden_retrieval", "no_knowledge", "alltools"} <= set(
        message.removeprefix("Unknown --retrieval-config 'embeddings': upstream tau2-bench knows ").rstrip(".")
        .split(", "))
    assert list(tmp_path.iterdir()) == []


def test_the_default_retrieval_config_without_its_key_is_refused_in_one_line(oracle_url: str, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """banking_knowledge's default, alltools, computes OpenAI embeddings before any simulation."""
    for variable in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(variable, raising=False)
    done = run([KNOWLEDGE, "--agent", "a2a_agent", "--a2a-endpoint", oracle_url, "--user", "scripted_user",
                "--task-ids", "task_001", "--results-dir", str(tmp_path / "results")], cwd=tmp_path)
    assert done.returncode == 2
    [shown] = done.stderr.splitlines()
    assert shown.startswith("error: The knowledge base of banking_knowledge cannot be prepared for retrieval "
                            "config alltools (OpenAIError: "), shown
    assert shown.endswith("or pass an offline --retrieval-config: bm25_grep, bm25, grep_only, full_kb, "
                          "golden_retrieval, no_knowledge.")
    assert list((tmp_path / "results").iterdir()) == []  # no simulation ran


def test_the_service_lists_both_domains_without_any_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """banking_knowledge's default retrieval config (alltools) would compute OpenAI embeddings and start a
    sandbox if its environment were built; listed, it shows the tools a run with that config gives the agent,
    from the toolkit class alone."""
    from tau2_a2a.service import catalog

    for variable in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(variable, raising=False)
    listed = {info.name: info for info in catalog.domains()}
    knowledge, workflow = listed[KNOWLEDGE], listed["telecom-workflow"]
    assert (knowledge.task_count, len(knowledge.tools)) == (97, 17)
    assert {"log_verification", "unlock_discoverable_agent_tool", "give_discoverable_user_tool"} <= set(
        knowledge.tools)
    assert {"KB_search_bm25", "KB_search_dense", "shell"} <= set(knowledge.tools)  # alltools' retrieval tools
    assert {"apply_for_credit_card", "request_human_agent_transfer"} <= set(knowledge.user_tools)
    assert (workflow.task_count, len(workflow.tools), len(workflow.user_tools)) == (114, 13, 30)


class _Slow(OracleLike):
    """The oracle, half a second per reply."""

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        await asyncio.sleep(0.5)
        await super().respond(context, event_queue, seen)


def test_the_timeout_reaches_upstream(serve: Serve, tmp_path: Path) -> None:
    """An agent that takes 0.5 s per reply cannot finish a task of four or more golden actions in 1 s: upstream
    ends the simulation as a timeout; without a timeout the same agent finishes it."""
    task = next(task for task in load_tasks("airline") if len(task.evaluation_criteria.actions or []) >= 4)
    slow = serve(lambda url: agent_app(_Slow(), url)).url
    cut = run_a2a(slow, tmp_path / "cut", "airline", task_ids=[task.id], timeout=1.0).results
    whole = run_a2a(slow, tmp_path / "whole", "airline", task_ids=[task.id]).results
    assert [s.termination_reason.value for s in cut.simulations] == ["timeout"]
    assert [(s.termination_reason.value, s.reward_info.reward) for s in whole.simulations] == [("user_stop", 1.0)]

