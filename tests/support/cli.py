"""`tau2-a2a` as a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_cli(args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None,
            new_session: bool = False) -> subprocess.Popen[str]:
    """Start `tau2-a2a ARGS` as a real process, stdout and stderr captured; the caller waits.

    The environment is this one plus `env`, without any ambient TAU2_A2A_AUTH_TOKEN. With
    `new_session` it leads its own process group, as a command typed at a terminal does.
    """
    script = Path(sys.executable).with_name("tau2-a2a")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "tau2_a2a.cli"]
    full_env = {k: v for k, v in os.environ.items() if k != "TAU2_A2A_AUTH_TOKEN"}
    full_env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})})
    return subprocess.Popen(command + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=full_env, cwd=cwd, start_new_session=new_session)
