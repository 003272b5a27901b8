"""The images (docker/Dockerfile), started exactly as AgentBeats starts them, on the host network: the green agent
assesses the oracle participant, both from `make image`, and the oracle scores 1.

Marked `docker`: `make test-docker` runs it after `make image`; `make test` leaves it out, and it skips where no
Docker daemon answers (CI). TAU2_A2A_IMAGE names the green image (default tau2-a2a:latest; its oracle is the same
name with -oracle); a missing image is built with `make image` first.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from a2a.types import TaskState

from tau2_a2a.protocol.hosting import free_port
from tests.support.assessments import assess, request, result_of
from tests.support.paths import REPO

pytestmark = pytest.mark.docker

IMAGE = os.environ.get("TAU2_A2A_IMAGE", "tau2-a2a:latest")
ORACLE_IMAGE = IMAGE.replace(":", "-oracle:", 1) if ":" in IMAGE else f"{IMAGE}-oracle"
STARTUP_SECONDS = 600  # a container's first start imports tau2, ADK and a2a-sdk's server on a busy 2-core machine


def docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def daemon_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return docker("info", "--format", "{{.ServerVersion}}", timeout=30).returncode == 0
    except subprocess.TimeoutExpired:
        return False


@pytest.fixture(scope="module")
def images() -> None:
    if not daemon_answers():
        pytest.skip("no Docker daemon answers")
    if any(docker("image", "inspect", name).returncode for name in (IMAGE, ORACLE_IMAGE)):
        built = subprocess.run(["make", "image", f"IMAGE={IMAGE.split(':')[0]}"], cwd=REPO, capture_output=True,
                               text=True, timeout=3600)
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]


class Container:
    """An image run as AgentBeats runs it: IMAGE --host 0.0.0.0 --port PORT --card-url URL (host network)."""

    def __init__(self, image: str, card_host: str, env: dict[str, str]) -> None:
        self.port = free_port()
        self.card_url = f"http://{card_host}:{self.port}"
        self.name = f"tau2-a2a-test-{uuid.uuid4().hex[:8]}"
        options = [item for name, value in env.items() for item in ("--env", f"{name}={value}")]
        started = docker("run", "--detach", "--network", "host", "--name", self.name, *options, image,
                         "--host", "0.0.0.0", "--port", str(self.port), "--card-url", self.card_url)
        assert started.returncode == 0, started.stderr

    def card(self) -> dict:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            try:
                reply = httpx.get(f"{self.card_url}/.well-known/agent-card.json", timeout=5)
                if reply.status_code == 200:
                    return reply.json()
            except httpx.HTTPError:
                pass
            state = docker("inspect", "--format", "{{.State.Status}}", self.name).stdout.strip()
            assert state == "running", f"{self.name} is {state}:\n{self.logs()}"
            assert time.monotonic() < deadline, f"no card within {STARTUP_SECONDS} s:\n{self.logs()}"
            time.sleep(0.5)

    def health(self) -> str:
        return docker("inspect", "--format", "{{.State.Health.Status}}", self.name).stdout.strip()

    def logs(self) -> str:
        shown = docker("logs", self.name)
        return shown.stdout + shown.stderr

    def remove(self) -> None:
        docker("rm", "--force", self.name)


@pytest.fixture(scope="module")
def containers(images: None) -> Iterator[dict[str, Container]]:
    # The participant is on loopback here (host network), where the image's policy (public, private) has it on
    # the scenario's private network; the evaluation at the suite's priority (tests/support/service.py).
    oracle = Container(ORACLE_IMAGE, "127.0.0.3", {})
    green = Container(IMAGE, "127.0.0.2", {"TAU2_EVAL_ALLOWED_TARGETS": "public,loopback",
                                           "TAU2_EVAL_EVALUATION_NICE": "0"})
    try:
        yield {"oracle": oracle, "green": green}
    finally:
        green.remove()
        oracle.remove()


def test_the_green_image_assesses_the_oracle_image_and_it_scores_1(containers: dict[str, Container]) -> None:
    green, oracle = containers["green"], containers["oracle"]
    for container in (green, oracle):
        card = container.card()
        assert {card["url"]} | {i["url"] for i in card["supportedInterfaces"]} == {container.card_url}
    _, task = asyncio.run(assess(green.card_url, request(oracle.card_url, num_tasks=2)))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, green.logs()
    result = result_of(task)
    assert (result["participant"], result["total_simulations"], result["avg_reward"], result["pass_hat_1"],
            result["clean"], result["tau2_version"]) == (oracle.card_url, 2, 1.0, 1.0, True, "1.0.1")


def test_the_agents_run_as_a_user_other_than_root(containers: dict[str, Container]) -> None:
    for container in containers.values():
        shown = docker("exec", container.name, "id", "-u", "-n")
        assert (shown.returncode, shown.stdout) == (0, "tau2\n"), shown.stderr


def test_the_healthcheck_reads_the_card_on_the_port_given(containers: dict[str, Container]) -> None:
    for container in containers.values():
        container.card()
        checked = docker("exec", container.name, "python3", "/opt/healthcheck.py")
        assert checked.returncode == 0, checked.stdout + checked.stderr
    config = json.loads(docker("image", "inspect", IMAGE).stdout)[0]["Config"]
    assert config["Healthcheck"]["Test"] == ["CMD", "python3", "/opt/healthcheck.py"]
    assert config["User"] == "tau2"
    assert config["Entrypoint"] == ["tau2-a2a", "serve", "--host", "0.0.0.0", "--port", "9009"]
