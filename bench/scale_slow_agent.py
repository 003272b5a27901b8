"""Scale against a slow agent: --max-concurrency N against 1, measured side by side in one run.

The agent is the reference oracle waiting a fixed delay before each reply,
served in its own process (so it does not share this process's interpreter)
behind a middleware that sees every request: the client's TCP connection
(address and port), the A2A context, and the time it took on the agent's side.

This process runs tau2 on the same tasks several times, each through
`tau2_a2a.runner.run.evaluate`: the same oracle with the same delay
in-process as a native tau2 agent (no protocol) at concurrency 1 and N, and
over A2A at 1 and at N with tau2's threads in this process. With --ray it
also runs A2A at N on a Ray instance started for the run (--ray local), so
two engines at N come out side by side, labelled:

- "1 process": tau2's threads in this process, scoring there too (the default);
- "ray local": the same simulations on Ray's actors (`tau2-a2a run --ray local`).

The measurement of the fork-based engine (worker and scoring processes,
since removed) against these two is in docs/ray.md, taken before its removal.

--skip-serial leaves out the A2A run at concurrency 1, --skip-native the
native runs: with --ray --skip-serial --skip-native it runs exactly "1 process"
and "ray local". It prints wall and CPU times, start-up (until the first
simulation began), peak memory, request latencies on both sides, the
connections the agent saw, and each speed-up against two ideals derived from
the run at 1 (without it, from the agent's delay alone):

- latency only: each simulation takes what it took at concurrency 1, and N
  workers take them in order as tau2 does, without slowing each other. The
  naive min(N, simulations) is not reachable even so: one long simulation
  (22 replies in airline) outlasts the others;
- on this machine: that, and at least the CPU the run at 1 used (every
  process, the agent's too) spread over all cores.

    python bench/scale_slow_agent.py --delay 0.5 --concurrency 32                  # the whole airline set
    python bench/scale_slow_agent.py --delay 0.5 --concurrency 32 --num-tasks 10
    python bench/scale_slow_agent.py --delay 2 --concurrency 32 --ray --skip-serial --skip-native
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _process_stats import MemorySampler, cpu_seconds, machine_cpu_seconds, rss_mb  # noqa: E402

STATS_PATH = "/_bench/stats"
RESET_PATH = "/_bench/reset"


class ConnectionCounter:
    """ASGI middleware: what the agent sees of its clients' connections.

    Per request it keeps the client's (address, port), the A2A context, and
    when it came and went; from these, `stats` derives the figures below.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self.reset()

    def reset(self) -> None:
        self.records: list[tuple[tuple[str, int], str, float, float]] = []  # (client, context, start, end)
        self.in_flight = 0
        self.peak_in_flight = 0

    def stats(self) -> dict[str, Any]:
        records = self.records
        busy = sum(end - start for _, _, start, end in records)
        took = sorted(1000 * (end - start) for _, _, start, end in records)
        return {
            "connections": len({client for client, _, _, _ in records}),
            "shared_connections": shared_connections(records),
            "requests": len(records),
            "peak_in_flight": self.peak_in_flight,
            "mean_request_ms": round(1000 * busy / len(records), 1) if records else None,
            "p50_request_ms": round(took[len(took) // 2], 1) if took else None,
            "p95_request_ms": round(took[min(len(took) - 1, int(0.95 * len(took)))], 1) if took else None,
            "rss_mb": rss_mb(),
        }

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] in (STATS_PATH, RESET_PATH):
            if scope["path"] == RESET_PATH:
                self.reset()
            await _send_json(send, self.stats())
            return
        seen = bytearray()  # request and response bodies: the context id is in one of them

        async def receive_and_keep() -> dict:
            event = await receive()
            seen.extend(event.get("body", b""))
            return event

        async def send_and_keep(event: dict) -> None:
            seen.extend(event.get("body", b""))
            await send(event)

        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        started = time.perf_counter()
        try:
            await self.app(scope, receive_and_keep, send_and_keep)
        finally:
            self.in_flight -= 1
            match = _CONTEXT_ID.search(bytes(seen))
            self.records.append((tuple(scope["client"]), match.group(1).decode() if match else "",
                                 started, time.perf_counter()))


_CONTEXT_ID = re.compile(rb'"context_?[iI]d"\s*:\s*"([^"]+)"')


def shared_connections(records: list[tuple[tuple[str, int], str, float, float]]) -> int:
    """Connections that carried a request of one simulation while another they had served was still running.

    tau2 runs each simulation in one worker from start to end, so a connection
    private to a worker only moves to the next simulation after the last
    request of the previous one. A connection that moves on earlier is shared
    between workers.
    """
    last_end: dict[str, float] = {}
    for _, context, _, end in records:
        last_end[context] = max(end, last_end.get(context, end))
    by_client: dict[tuple[str, int], list[tuple[float, str]]] = {}
    for client, context, start, _ in records:
        if context:
            by_client.setdefault(client, []).append((start, context))
    shared = 0
    for requests in by_client.values():
        requests.sort()
        if any(before != after and last_end[before] > start
               for (_, before), (start, after) in zip(requests, requests[1:])):
            shared += 1
    return shared


async def _send_json(send: Any, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def oracle_app(url: str, delay: float) -> ConnectionCounter:
    """The reference oracle, `delay` seconds per reply, behind the counter."""
    from tau2_a2a.protocol.hosting import a2a_app
    from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card

    return ConnectionCounter(a2a_app(OracleExecutor(delay=delay), oracle_card(url)))


def serve(port: int, delay: float, keep_alive: float) -> None:
    """Server mode: the counted oracle in the foreground."""
    import uvicorn

    url = f"http://127.0.0.1:{port}"
    uvicorn.run(oracle_app(url, delay), host="127.0.0.1", port=port, log_level="warning",
                timeout_keep_alive=keep_alive)


class SlowNativeOracle:
    """The oracle as a native tau2 agent that sleeps `llm_args["delay"]` seconds before each reply."""

    NAME = "slow_oracle_agent"

    @classmethod
    def register(cls) -> None:
        from tau2_a2a.tau2bench.participants.native_oracle import NativeOracleAgent
        from tau2_a2a.tau2bench.seam.distribution import registry

        class Agent(NativeOracleAgent):
            def generate_next_message(self, message, state):  # type: ignore[no-untyped-def]
                time.sleep(float(self.llm_args.get("delay", 0.0)))
                return super().generate_next_message(message, state)

        if cls.NAME not in registry.get_info().agents:
            registry.register_agent(Agent, cls.NAME)


def list_schedule(durations: list[float], slots: int) -> float:
    """Wall time of `durations` run in order on `slots` workers, each taking the next as it frees:
    how tau2's thread pool hands out simulations."""
    free_at = [0.0] * slots
    for duration in durations:
        earliest = min(range(slots), key=free_at.__getitem__)
        free_at[earliest] += duration
    return max(free_at)


def run_settings(arm: str, url: str, domain: str, num_tasks: int | None, concurrency: int, delay: float,
                 results_dir: Path, run_number: int) -> Any:
    """The RunSettings of one run of `arm`: the slow oracle natively, or the A2A agent at `url` in this
    process ("a2a") or on a local Ray instance ("ray"); the scripted user, no LLM anywhere."""
    from tau2_a2a.client.config import A2AConfig
    from tau2_a2a.runner.settings import RunSettings

    common = dict(domain=domain, user="scripted_user", user_llm="scripted", user_llm_args={},
                  num_tasks=num_tasks, max_concurrency=concurrency, results_dir=str(results_dir),
                  save_to=f"{run_number}_{arm}")  # arms may share a label: never resume
    if arm == "native":
        return RunSettings(agent=SlowNativeOracle.NAME, a2a=None, agent_llm="slow-oracle",
                           agent_llm_args={"delay": delay}, **common)
    return RunSettings(a2a=A2AConfig(endpoint=url), ray="local" if arm == "ray" else None, agent_llm_args={},
                       **common)


def measure(arm: str, url: str, domain: str, num_tasks: int | None, concurrency: int, delay: float,
            results_dir: Path, agent_pid: int, run_number: int = 0, name: str | None = None) -> dict[str, Any]:
    """One evaluation of `arm` ("native", "a2a" or "ray") at `concurrency`: times, memory, what the agent saw.

    "a2a" runs tau2's threads in this process, "ray" runs on a local Ray
    instance started for the run. RSS covers this process, PSS it and its
    helper processes (Ray's), machine CPU every process (`agent_pid`, the
    agent, is left out of PSS only). `name` labels the run in the report
    (default: its arm and concurrency)."""
    from tau2_a2a.runner.run import evaluate

    httpx.post(f"{url}{RESET_PATH}").raise_for_status()
    settings = run_settings(arm, url, domain, num_tasks, concurrency, delay, results_dir, run_number)
    label = f"{arm} c{concurrency}"
    rss_before, load_before = rss_mb(), os.getloadavg()[0]
    cpu_before, machine_before = cpu_seconds(), machine_cpu_seconds()
    with MemorySampler(exclude=agent_pid) as memory:
        started, started_at = time.perf_counter(), datetime.now()
        outcome = evaluate(settings)
        wall = time.perf_counter() - started
    simulations = outcome.results.simulations
    measured = {
        "label": name or label,
        "settings": label,
        "arm": arm,
        "concurrency": concurrency,
        "simulations": len(simulations),
        "reward_1": sum(1 for s in simulations if s.reward_info and s.reward_info.reward == 1.0),
        "wall_s": wall,
        "startup_s": min(datetime.fromisoformat(s.start_time) for s in simulations).timestamp()
        - started_at.timestamp(),
        "simulation_durations_s": [s.duration for s in simulations],
        "cpu_s": cpu_seconds() - cpu_before,
        "run_cpu_s": memory.tree_cpu,
        "machine_cpu_s": machine_cpu_seconds() - machine_before,
        "load_average_1min": [load_before, os.getloadavg()[0]],
        "rss_before_mb": rss_before,
        "rss_peak_mb": memory.peak,
        "pss_peak_with_helpers_mb": memory.peak_tree,
        "rss_after_mb": rss_mb(),
    }
    if outcome.metrics is not None:
        protocol = outcome.metrics["run"]
        measured["a2a_wait_s"] = protocol["a2a_time_s"]
        measured["a2a_request_ms_mean"] = round(1000 * protocol["a2a_time_s"] / protocol["requests"], 1)
        measured["a2a_request_ms_p50"] = protocol["latency_ms"]["p50"]
        measured["a2a_request_ms_p95"] = protocol["latency_ms"]["p95"]
        measured["simulation_requests"] = [s["summary"]["requests"] for s in outcome.metrics["simulations"]]
        measured["server"] = httpx.get(f"{url}{STATS_PATH}").json()
    return measured


def ideal_walls(one: dict[str, Any], n: int) -> tuple[float, float]:
    """The wall times at concurrency `n` that nothing but the work itself would allow, from the run at 1:

    - latency only: each simulation takes as long as it took at concurrency 1
      (its own wait on the agent and its share of the local work), handed out
      to `n` workers in order as tau2 does; no interference between them;
    - on this machine: no less than that, and no less than the CPU the run at
      1 took on all processes (ours and the agent's) spread over every core.
    """
    durations = one["simulation_durations_s"]
    local_per_simulation = max(0.0, one["wall_s"] - sum(durations)) / len(durations)
    latency_only = list_schedule([d + local_per_simulation for d in durations], n)
    on_machine = max(latency_only, one["machine_cpu_s"] / (os.cpu_count() or 1))
    return latency_only, on_machine


def delay_ideal(run: dict[str, Any], n: int, delay: float) -> float:
    """The wall time at concurrency `n` that the agent's delay alone allows: each simulation waits its
    replies x `delay`, handed out to `n` workers in order as tau2 does (no local work at all)."""
    return list_schedule([requests * delay for requests in run["simulation_requests"]], n)


def _or_dash(value: Any) -> Any:
    return "-" if value is None else value


def report(runs: list[dict[str, Any]], n: int, delay: float) -> str:
    sims = runs[0]["simulations"]
    lines = [f"{sims} simulations per run; all runs side by side in this process; "
             f"{os.cpu_count()} cores",
             f"{'':38}" + "".join(f"{r['label']:>16}" for r in runs)]

    def row(label: str, value: Any) -> None:
        lines.append(f"{label:38}" + "".join(f"{_or_dash(value(r)):>16}" for r in runs))

    def server(key: str) -> Any:
        return lambda r: r["server"][key] if "server" in r else "-"

    row("settings", lambda r: r["settings"])
    row("wall time (s)", lambda r: f"{r['wall_s']:.1f}")
    row("start-up: until the first simulation (s)", lambda r: f"{r['startup_s']:.1f}")
    row("CPU of this process (s)", lambda r: f"{r['cpu_s']:.1f}")
    row("CPU of the run's processes (s)", lambda r: f"{r['run_cpu_s']:.1f}")
    row("CPU of the machine (s)", lambda r: f"{r['machine_cpu_s']:.1f}")
    row("simulations with reward 1.0", lambda r: r["reward_1"])
    row("peak RSS (MiB)", lambda r: f"{r['rss_peak_mb']:.0f}")
    row("peak PSS with helper processes (MiB)", lambda r: f"{r['pss_peak_with_helpers_mb']:.0f}")
    row("RSS after (MiB)", lambda r: f"{r['rss_after_mb']:.0f}")
    row("1-min load average at start", lambda r: f"{r['load_average_1min'][0]:.1f}")
    row("A2A request, client, mean (ms)", lambda r: r.get("a2a_request_ms_mean", "-"))
    row("A2A request, client, p50 (ms)", lambda r: r.get("a2a_request_ms_p50", "-"))
    row("A2A request, client, p95 (ms)", lambda r: r.get("a2a_request_ms_p95", "-"))
    row("agent: request time, its side (ms)", server("mean_request_ms"))
    row("agent: request time, its side, p50 (ms)", server("p50_request_ms"))
    row("agent: request time, its side, p95 (ms)", server("p95_request_ms"))
    row("agent: requests", server("requests"))
    row("agent: peak requests in flight", server("peak_in_flight"))
    row("agent: TCP connections seen", server("connections"))
    row("agent: connections shared by workers", server("shared_connections"))
    row("agent: RSS after (MiB)", server("rss_mb"))

    for arm, engines in (("native", ("native",)), ("a2a", ("a2a", "ray"))):
        [one] = [r for r in runs if r["arm"] == arm and r["concurrency"] == 1] or [None]
        if one is None:
            continue
        latency_only, on_machine = ideal_walls(one, n)
        ideal, machine_ideal = one["wall_s"] / latency_only, one["wall_s"] / on_machine
        lines.append(f"{arm}: ideal speed-up at concurrency {n}: {ideal:.2f}x with latency only "
                     f"(naive bound min({n}, {sims}) = {min(n, sims)}x), {machine_ideal:.2f}x on this machine")
        for r in runs:
            if r["arm"] in engines and r["concurrency"] == n:
                speedup = one["wall_s"] / r["wall_s"]
                lines.append(f"  {r['label']:>16}: {speedup:.2f}x = {speedup / ideal:.0%} of the latency-only "
                             f"ideal, {speedup / machine_ideal:.0%} of this machine's")
    at_n = [r for r in runs if "simulation_requests" in r and r["concurrency"] == n]
    if at_n and not any(r["concurrency"] == 1 for r in runs):
        ideal = delay_ideal(at_n[0], n, delay)
        lines.append(f"ideal at concurrency {n} from the agent's delay alone ({delay} s per reply, no local work): "
                     f"{ideal:.1f} s")
        serial = sum(at_n[0]["simulation_requests"]) * delay
        lines.append(f"speed-up: the agent's delay in series ({serial:.0f} s: every reply x {delay} s, one "
                     "simulation at a time) over the wall time")
        for r in at_n:
            lines.append(f"  {r['label']:>16}: {r['wall_s']:.1f} s = {ideal / r['wall_s']:.0%} of that ideal, "
                         f"speed-up {serial / r['wall_s']:.1f}x")
    shared = [r for r in runs if "server" in r and r["concurrency"] == n and r["arm"] == "a2a"]
    if shared:
        stats = shared[-1]["server"]
        lines.append(
            f"connections at concurrency {n}: {stats['connections']} for {stats['requests']} requests, peak "
            f"{stats['peak_in_flight']} in flight; {stats['shared_connections']} moved to another simulation while "
            "one they had served was still running, which a connection private to a thread never does"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain", default="airline")
    parser.add_argument("--num-tasks", type=int, default=None, help="Tasks to run (default: the whole domain)")
    parser.add_argument("--delay", type=float, default=0.5, help="Agent delay per reply in seconds")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--keep-alive", type=float, default=5.0,
                        help="The agent server's keep-alive timeout in seconds (uvicorn's default: 5)")
    parser.add_argument("--results-dir", default=None, help="Keep the results here (default: a temp dir)")
    parser.add_argument("--skip-native", action="store_true", help="Only the A2A runs")
    parser.add_argument("--skip-serial", action="store_true", help="Leave out the A2A run at concurrency 1")
    parser.add_argument("--ray", action="store_true",
                        help="Also run A2A at --concurrency on --ray local, beside the run in one process")
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.delay, args.keep_alive)
        return 0

    from tau2_a2a.protocol.hosting import free_port, wait_for_card

    SlowNativeOracle.register()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port), "--delay", str(args.delay),
                               "--keep-alive", str(args.keep_alive)])
    n = args.concurrency
    # (arm, concurrency, name); name None: the arm and the concurrency
    plan: list[tuple[str, int, str | None]] = []
    if not args.skip_native:
        plan += [("native", 1, None), ("native", n, None)]
    if not args.skip_serial:
        plan += [("a2a", 1, None)]
    plan += [("a2a", n, "1 process" if args.ray else None)]
    if args.ray:
        plan += [("ray", n, "ray local")]
    runs = []
    try:
        wait_for_card(url, server)
        with tempfile.TemporaryDirectory() as scratch:
            results_dir = Path(args.results_dir or scratch)
            for number, (arm, concurrency, name) in enumerate(plan):
                runs.append(measure(arm, url, args.domain, args.num_tasks, concurrency, args.delay, results_dir,
                                    server.pid, run_number=number, name=name))
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"\nagent delay per reply: {args.delay} s; agent keep-alive: {args.keep_alive} s")
    print(report(runs, n, args.delay))
    print(json.dumps(runs, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
