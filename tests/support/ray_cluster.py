"""`tau2-a2a run --ray` against a test cluster: the command, its token, the nodes' sizes and logs."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from tau2_a2a.client.config import AUTH_TOKEN_ENV

TOKEN = "ray-bearer-5e0c7a1d"
CLI = str(Path(sys.executable).parent / "tau2-a2a")
NODE = {"num_cpus": 1, "object_store_memory": 80 * 2**20}


def run_on_ray(url: str, address: str | None, results_dir: Path, save_to: str, tasks: list[str],
               *extra: str) -> list[str]:
    command = [CLI, "run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", url, "--user", "scripted_user",
               "--task-ids", *tasks, "--results-dir", str(results_dir), "--save-to", save_to, *extra]
    return command + (["--ray", address] if address else [])


def env_with_token() -> dict[str, str]:
    return {**os.environ, AUTH_TOKEN_ENV: TOKEN}


def log_files(cluster: Any) -> list[Path]:
    directories = {Path(node.get_logs_dir_path()) for node in [cluster.head_node, *cluster.worker_nodes]}
    return [path for directory in directories for path in directory.rglob("*") if path.is_file()]
