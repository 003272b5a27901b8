"""Importing tau2-a2a changes nothing in tau2 nor in the process; a run puts its parts inside tau2 and takes them
out again (`tau2bench.seam.hooks`); each half of the seam gives what `protocol.Tau2Seam` names."""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
import threading
from pathlib import Path

from tau2_a2a.tau2bench.run.orchestration import A2AOrchestrator
from tau2_a2a.tau2bench.seam import distribution
from tau2_a2a.tau2bench.seam.hooks import entered, tau2_hooks
from tau2_a2a.tau2bench.seam.protocol import SEAM_NAMES, Tau2Seam
from tests.support.paths import REPO
from tests.support.runs import run_a2a

# What a process looks like, as far as tau2-a2a could change it: every attribute of every tau2 module and of
# the classes in them (by identity), tau2's registry, event loops' __del__, LiteLLM's shared clients, the
# environment. Printed as JSON.
SNAPSHOT = """
import asyncio, inspect, json, os, sys
import litellm
def snapshot():
    attributes = {}
    for name, module in sorted(sys.modules.items()):
        if module is None or not (name == "tau2" or name.startswith("tau2.")):
            continue
        for key, value in list(vars(module).items()):
            attributes[f"{name}.{key}"] = id(value)
            if inspect.isclass(value) and value.__module__ == name:
                for member, item in list(vars(value).items()):
                    attributes[f"{name}.{key}.{member}"] = id(item)
    from tau2.registry import registry
    info = registry.get_info()
    return {"attributes": attributes, "agents": sorted(info.agents), "users": sorted(info.users),
            "loop_del": id(asyncio.base_events.BaseEventLoop.__del__), "aclient": id(litellm.aclient_session),
            "environ": dict(os.environ)}
"""

# tau2's modules tau2-a2a reaches into (of either distribution), imported without tau2-a2a
IMPORT_TAU2 = """
import importlib
for name in ("tau2.registry", "tau2.evaluator.evaluator_nl_assertions", "tau2.utils.display", "tau2.run",
             "tau2.runner.batch", "tau2.runner.build", "tau2.runner.simulation", "tau2.runner.helpers"):
    try:
        importlib.import_module(name)
    except ImportError:
        pass
"""

IMPORT_EVERYTHING = """
import importlib, pkgutil, tau2_a2a
from tau2_a2a.tau2bench.seam.imports import DISTRIBUTION, NVIDIA
other_half = "tau2_a2a.tau2bench.seam." + ("upstream" if DISTRIBUTION == NVIDIA else "nvidia")  # for the other tau2
for module in pkgutil.walk_packages(tau2_a2a.__path__, "tau2_a2a."):
    if not module.name.endswith("__main__") and module.name != other_half:
        importlib.import_module(module.name)
"""


def changes(before: dict, after: dict) -> dict:
    """What differs between two snapshots: attributes changed or gone (ones added by a newly imported tau2
    module are not changes), registered names, the rest."""
    found = {key: "changed" for key, value in before["attributes"].items()
             if after["attributes"].get(key, value) != value}
    found.update({key: "gone" for key in before["attributes"] if key not in after["attributes"]})
    for key in ("agents", "users", "loop_del", "aclient", "environ"):
        if before[key] != after[key]:
            found[key] = "changed"
    return found


def test_importing_all_of_tau2_a2a_changes_nothing_in_tau2_nor_in_the_process() -> None:
    script = (SNAPSHOT + IMPORT_TAU2 + "before = snapshot()\n" + IMPORT_EVERYTHING
              + "print(json.dumps({'before': before, 'after': snapshot()}))")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "PYTHONPATH": f"{REPO}/src:{REPO}",
                               "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert done.returncode == 0, done.stderr[-3000:]
    snapshots = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(snapshots["before"]["attributes"]) > 1000  # tau2 was imported and looked at
    assert changes(snapshots["before"], snapshots["after"]) == {}


def test_a_run_puts_its_parts_in_tau2_and_takes_them_out_again(oracle_url: str, tmp_path: Path) -> None:
    outside = _orchestrator_in_use()
    assert not entered() and outside is not A2AOrchestrator

    outcome = run_a2a(oracle_url, tmp_path, "airline", task_ids=["0"])

    assert [s.reward_info.reward for s in outcome.results.simulations] == [1.0]
    assert not entered() and _orchestrator_in_use() is outside


def test_hooks_nest_and_stay_until_the_last_exit_from_any_thread() -> None:
    outer_left, inner_in = threading.Event(), threading.Event()

    def inner() -> None:
        with tau2_hooks():
            inner_in.set()
            outer_left.wait(30)
            assert entered() and _orchestrator_in_use() is A2AOrchestrator  # the other thread's exit left them
        assert not entered()

    with tau2_hooks():
        assert _orchestrator_in_use() is A2AOrchestrator
        with tau2_hooks():
            pass
        assert _orchestrator_in_use() is A2AOrchestrator  # the inner exit was not the last
        thread = threading.Thread(target=inner)
        thread.start()
        assert inner_in.wait(30)
    outer_left.set()
    thread.join(30)
    assert not entered() and _orchestrator_in_use() is not A2AOrchestrator


def test_the_installed_half_of_the_seam_gives_what_the_protocol_names_with_its_parameters() -> None:
    half = sys.modules[f"tau2_a2a.tau2bench.seam.{'nvidia' if distribution.DISTRIBUTION == distribution.NVIDIA else 'upstream'}"]
    assert sorted(half.__all__) == SEAM_NAMES
    for name in SEAM_NAMES:
        promised = vars(Tau2Seam).get(name)
        if not inspect.isfunction(promised):
            assert hasattr(half, name), name
            continue
        given = getattr(half, name)
        expected = [p for p in inspect.signature(promised).parameters.values() if p.name != "self"]
        assert [(p.name, p.kind, p.default) for p in inspect.signature(given).parameters.values()] == [
            (p.name, p.kind, p.default) for p in expected], name


def _orchestrator_in_use() -> type:
    """The orchestrator class tau2's run builds now."""
    return importlib.import_module("tau2.run" if distribution.DISTRIBUTION == distribution.NVIDIA
                                   else "tau2.runner.build").Orchestrator
