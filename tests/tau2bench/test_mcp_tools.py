"""The MCP tools modes score what native tau2 scores: the oracle calls its golden actions with the official MCP
client (and, agent-driven, talks to the user through send_message_to_user), on every text domain and binding.

bench/oracle_fidelity.py --a2a-tools mcp runs whole domains.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tau2_a2a.client.config import A2AConfig
from tau2_a2a.protocol.hosting import a2a_app
from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card
from tau2_a2a.runner.protocol_metrics import metrics_path
from tau2_a2a.tau2bench.run.fidelity import scored, trajectory_differences
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, UPSTREAM
from tests.support.runs import FAST, Serve, run_a2a, run_native_oracle, telecom_sample

SAMPLES = {
    "airline": ["0", "5", "23"],
    "retail": ["0", "7", "42"],
    "telecom": telecom_sample("telecom")[:3],
}
if DISTRIBUTION == UPSTREAM:
    SAMPLES |= {"telecom-workflow": telecom_sample("telecom-workflow")[:2],
                "banking_knowledge": ["task_001", "task_031", "task_061"]}
OFFLINE_RETRIEVAL = {"banking_knowledge": {"retrieval_config": "bm25_grep"}}


@pytest.mark.parametrize("driven", [False, True], ids=["mcp", "agent-driven"])
@pytest.mark.parametrize("domain", sorted(SAMPLES))
def test_the_oracle_over_mcp_scores_what_native_tau2_scores(domain: str, driven: bool, oracle_url: str,
                                                             tmp_path: Path) -> None:
    settings = {"task_ids": SAMPLES[domain], "max_concurrency": 3, **OFFLINE_RETRIEVAL.get(domain, {})}
    native = run_native_oracle(tmp_path / "native", domain, **settings)
    outcome = run_a2a(oracle_url, tmp_path / "mcp", domain, a2a=A2AConfig(
        endpoint=oracle_url, retry=FAST, tools="mcp", driven=driven), **settings)

    rewards = {s.task_id: s.reward_info.reward for s in outcome.results.simulations}
    assert rewards == {s.task_id: s.reward_info.reward for s in native.simulations}
    assert set(rewards.values()) == {1.0}
    assert {s.task_id: scored(s) for s in outcome.results.simulations} == \
        {s.task_id: scored(s) for s in native.simulations}
    assert {s.termination_reason.value for s in outcome.results.simulations} == {"user_stop"}
    assert trajectory_differences(outcome.results, native) == []
    # Every tool call of the agent came over MCP, metered; none went through the A2A messages.
    report = json.loads(metrics_path(outcome.results_path).read_text())
    calls = sum(1 for s in outcome.results.simulations for m in s.messages
                if m.role == "assistant" and m.tool_calls)
    mcp_calls = sum(1 for s in report["simulations"] for r in s.get("mcp", {}).get("requests", [])
                    if r["method"] == "tools/call" and r["http_status"] == 200)
    spoken = sum(1 for s in outcome.results.simulations for m in s.messages  # the agent's words, not tau2's greeting
                 if m.role == "assistant" and m.content and (m.raw_data or {}).get("a2a"))
    assert mcp_calls == calls + (spoken if driven else 0)  # agent-driven, its words went through send_message_to_user
    assert outcome.results.info.agent_info.llm_args["a2a_tools_used"] == ("driven" if driven else "mcp")


def test_no_mcp_token_reaches_the_logs_or_the_files(oracle_url: str, tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    import logging
    import re

    caplog.set_level(logging.INFO, logger="tau2_a2a")
    run_a2a(oracle_url, tmp_path, "airline", task_ids=["0"], a2a=A2AConfig(
        endpoint=oracle_url, retry=FAST, tools="mcp", debug=True))
    assert "Bearer ***" in caplog.text  # the first message named the token, and the debug log hid it
    shown = re.compile(r"Bearer\s+(?!\*\*\*)[A-Za-z0-9._~+/=-]{8,}")
    assert not shown.search(caplog.text)
    for path in tmp_path.rglob("*.json"):
        assert not shown.search(path.read_text()) and "mcpServers" not in path.read_text()


@pytest.mark.parametrize(("transport", "streaming"), [("jsonrpc", True), ("http-json", False),
                                                      ("http-json", True), ("grpc", False), ("grpc", True)])
def test_every_binding_carries_the_mcp_tools_modes(transport: str, streaming: bool, serve: Serve,
                                                   tmp_path: Path) -> None:
    from tau2_a2a.protocol.hosting import BackgroundServer, free_port

    port, grpc_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    card = oracle_card(url, f"127.0.0.1:{grpc_port}")
    card.capabilities.streaming = True
    with BackgroundServer(a2a_app(OracleExecutor(), card), port=port, grpc_port=grpc_port):
        for driven in (False, True):
            outcome = run_a2a(url, tmp_path / f"{driven}", "airline", task_ids=["0", "5"], a2a=A2AConfig(
                endpoint=url, retry=FAST, tools="mcp", driven=driven, transport=transport, streaming=streaming))
            assert {s.task_id: s.reward_info.reward for s in outcome.results.simulations} == {"0": 1.0, "5": 1.0}
            requests = [r for s in json.loads(metrics_path(outcome.results_path).read_text())["simulations"]
                        for r in s["requests"]]
            assert {r["transport"] for r in requests} == {{"jsonrpc": "JSONRPC", "http-json": "HTTP+JSON",
                                                           "grpc": "GRPC"}[transport]}
            assert {r["method"] for r in requests} >= {"SendStreamingMessage" if streaming else "SendMessage"}
