"""On upstream tau2-bench v1.0.1: a tau2-a2a run's results files go through upstream's own `tau2 submit prepare`
and `tau2 submit validate` as they are, and the submission says what the run measured.

Upstream's verification wants every task of a domain's base split, each run `num_trials` times, so the runs
cover airline's 50 and telecom's 114 base tasks (the two domains scored without an LLM), two trials each,
against one A2A agent that gets some of them wrong: pass^1 and pass^2 differ. Domains whose A2A settings
differ are refused by upstream, as docs/leaderboard.md (the same steps, for users) says.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tau2_a2a.protocol.hosting import BackgroundServer, free_port
from tau2_a2a.runner.outcome import RunOutcome
from tau2_a2a.tau2bench.run.provenance import PROVENANCE_KEY, provenance
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, UPSTREAM, VERSION, compute_metrics, load_tasks
from tests.support.executors import GetsTasksWrong, agent_app
from tests.support.runs import run_a2a

pytestmark = [
    pytest.mark.upstream,
    pytest.mark.skipif(DISTRIBUTION != UPSTREAM, reason=f"needs upstream tau2-bench; {DISTRIBUTION} is installed"),
]

TAU2 = Path(sys.executable).with_name("tau2")  # upstream's console script, in the same environment
DOMAINS = ("airline", "telecom")
MODEL = "acme-agent-1"  # --agent-llm: the name the results record for the agent under test
ORGANIZATION = "Acme Research"

# `tau2 submit prepare` asks these, in this order, on stdin; an empty answer takes the default it shows.
ANSWERS = [
    "",  # model name (default: the agent's LLM as the results record it)
    "",  # user simulator model (default: the user's LLM as the results record it)
    ORGANIZATION,  # model organization
    "",  # submitting organization (default: the model organization)
    "team@acme.example",  # contact email
    "",  # contact name
    "",  # GitHub username
    "n",  # highlight as new
    "custom",  # submission type: an A2A agent is its own scaffold (docs/leaderboard.md)
    "",  # reasoning effort
    "",  # evaluation date (default: today)
    "",  # tau2-bench version (default: the installed one)
    "An A2A agent evaluated by tau2-a2a over A2A.",  # notes
    "y",  # modified prompts: the agent's prompts are its own
    "n",  # omitted tasks
    "The agent's own prompts and control flow, reached over A2A.",  # details of the modification
    "y",  # add a reference
    "Acme agent",  # its title
    "https://github.com/acme/agent",  # its URL
    "github",  # its type
    "n",  # another reference
    "",  # model release date
]


def submit(*args: str, cwd: Path, answers: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Upstream's `tau2 submit ...`; rich writes one long line per message (no wrapping at 80 columns)."""
    return subprocess.run([str(TAU2), "submit", *args], cwd=cwd, capture_output=True, text=True, timeout=600,
                          input="\n".join(answers) + "\n" if answers is not None else "",
                          env={**os.environ, "COLUMNS": "1000"})


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunOutcome]:
    """Both domains, whole base splits, two trials, against one agent at one endpoint, as a submission has them."""
    telecom = [task.id for task in load_tasks("telecom", task_split_name="base")]
    # airline 3 checks what the agent says and 8 a booking it makes: doing nothing fails them (upstream's data)
    agent = GetsTasksWrong(always=("3", telecom[0]), every_other=("8", telecom[1]))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    results_dir = tmp_path_factory.mktemp("submission_runs")
    with BackgroundServer(agent_app(agent, url), port=port):
        return {domain: run_a2a(url, results_dir, domain, num_trials=2, max_concurrency=4, agent_llm=MODEL,
                                save_to=f"acme_{domain}") for domain in DOMAINS}


@pytest.fixture(scope="module")
def prepared(runs: dict[str, RunOutcome], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`tau2 submit prepare` on the runs' results files: its output, and the submission directory it made."""
    work = tmp_path_factory.mktemp("submission")
    files = [str(runs[domain].results_path) for domain in DOMAINS]
    done = submit("prepare", *files, "--output", "out", cwd=work, answers=ANSWERS)
    made = list((work / "out").iterdir()) if (work / "out").is_dir() else []
    if len(made) != 1:
        pytest.fail(f"tau2 submit prepare made {len(made)} submissions:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return {"process": done, "directory": made[0]}


def test_upstream_prepare_accepts_the_runs(prepared: dict[str, Any]) -> None:
    done = prepared["process"]
    assert done.returncode == 0, done.stderr[-3000:]
    assert "✅ All trajectories passed verification!" in done.stdout
    assert "🎉 Submission prepared successfully!" in done.stdout
    assert "❌" not in done.stdout, done.stdout[-3000:]
    assert prepared["directory"].name.startswith(f"{MODEL}_acme-research_")


def test_upstream_validate_accepts_the_submission(prepared: dict[str, Any]) -> None:
    done = submit("validate", str(prepared["directory"]), cwd=prepared["directory"].parent)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "🎉 All files passed all checks!" in done.stdout
    assert "✅ Submission validation successful!" in done.stdout
    assert "✅ Submission metrics validation successful!" in done.stdout
    assert "❌" not in done.stdout, done.stdout[-3000:]


def test_the_submission_says_what_the_runs_measured(runs: dict[str, RunOutcome], prepared: dict[str, Any]) -> None:
    submission = json.loads((prepared["directory"] / "submission.json").read_text())
    assert submission["model_name"] == MODEL
    assert submission["model_organization"] == submission["submitting_organization"] == ORGANIZATION
    assert submission["submission_type"] == "custom"
    assert submission["modality"] == "text"
    assert submission["methodology"]["user_simulator"] == "scripted"
    assert submission["methodology"]["tau2_bench_version"] == VERSION
    assert submission["methodology"]["verification"]["modified_prompts"] is True
    assert submission["methodology"]["verification"]["omitted_questions"] is False
    assert submission["references"] == [{"title": "Acme agent", "url": "https://github.com/acme/agent",
                                         "type": "github"}]
    assert submission["trajectories_available"] is True
    # each run's results.json (upstream's layout) becomes <domain>_results.json in the submission
    assert submission["trajectory_files"] == {domain: f"{domain}_results.json" for domain in DOMAINS}
    assert set(submission["results"]) == set(DOMAINS)
    for domain in DOMAINS:
        metrics = compute_metrics(runs[domain].results)
        figures = submission["results"][domain]
        # an agent that reports no usage of its own (docs/protocol.md): no cost in the submission, never 0
        assert figures == {f"pass_{k}": metrics.pass_hat_ks[k] * 100 for k in (1, 2)}
        assert 0 < figures["pass_2"] < figures["pass_1"] < 100  # the agent's failures show, per k
        assert math.isnan(metrics.avg_agent_cost)  # tau2's own reading of costs not reported, which prepare leaves out


def test_a_cost_not_reported_stays_null_through_the_results_and_metrics(runs: dict[str, RunOutcome]) -> None:
    for domain in DOMAINS:
        results = json.loads(runs[domain].results_path.read_text())
        assert {s["agent_cost"] for s in results["simulations"]} == {None}
        assert {s["user_cost"] for s in results["simulations"]} == {0.0}  # the scripted user's, kept
        metrics = json.loads(runs[domain].metrics_path.read_text())
        assert metrics["run"]["cost_usd"] == {"agent": None, "user": 0.0, "judge": 0.0, "total": None}
        assert {s["cost_usd"]["agent"] for s in metrics["simulations"]} == {None}


def test_the_submitted_trajectories_keep_their_provenance(runs: dict[str, RunOutcome],
                                                          prepared: dict[str, Any]) -> None:
    for domain in DOMAINS:
        submitted = prepared["directory"] / "trajectories" / f"{domain}_results.json"
        assert submitted.read_bytes() == runs[domain].results_path.read_bytes()
        assert json.loads(submitted.read_text())[PROVENANCE_KEY] == provenance(domain)


def test_upstream_refuses_domains_run_with_other_a2a_settings(runs: dict[str, RunOutcome], tmp_path: Path) -> None:
    """The agent's A2A settings are its llm_args, which upstream compares across domains (docs/leaderboard.md):
    telecom's file as a run with a longer --a2a-timeout would have written it."""
    telecom = json.loads(runs["telecom"].results_path.read_text())
    telecom["info"]["agent_info"]["llm_args"]["a2a_timeout"] = 600.0
    (tmp_path / "acme_telecom.json").write_text(json.dumps(telecom))
    done = submit("prepare", str(runs["airline"].results_path), str(tmp_path / "acme_telecom.json"), "--output",
                  "out", "--no-verify", cwd=tmp_path, answers=ANSWERS)
    assert done.returncode == 0, done.stderr[-3000:]
    assert ("❌ Submission set validation failed: Agent / User Simulator should be the same for all results. "
            in done.stdout), done.stdout[-3000:]
    assert "'a2a_timeout': 600.0" in done.stdout
    assert not (tmp_path / "out").exists()
