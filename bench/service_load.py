"""The evaluation service under load: polling latency, the database's cost, one replica against two.

1. Polling: `--evaluations` evaluations of a slow oracle run at once while
   `--pollers` clients poll, each in turn `GetTask` on one evaluation's A2A
   task and the `get_evaluation` tool, for `--seconds`. p50/p99 per call.
2. The database in the request path: the same load against the service with
   its A2A tasks in a2a-sdk's InMemoryTaskStore instead of the database
   (evaluation records are in SQL either way), side by side, with the
   database a SQLite file and a PostgreSQL server (a real one started here).
3. Throughput: `--throughput-evaluations` short evaluations of the fast oracle
   through one replica, then through two replicas on one PostgreSQL database,
   each `--max-running` 2.

Each service runs as its own process (this script, re-invoked with --serve).

    python bench/service_load.py --pollers 50 --evaluations 8 --seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from _common import oracle_process, serving_process  # noqa: E402
from service_common import call, percentile, service_process  # noqa: E402

from tau2_a2a.serving import free_port  # noqa: E402

TARGET_P99_MS = 100.0


def serve(port: int, results_dir: str, store: str, max_running: int, database: str | None) -> None:
    """Serve `tau2-a2a serve`'s app with its A2A tasks in the database or in memory (--serve)."""
    from a2a.server.tasks import InMemoryTaskStore

    from tau2_a2a.service.app import build_app
    from tau2_a2a.service.evaluations import Limits
    from tau2_a2a.service.settings import ServiceSettings
    from tau2_a2a.serving import serve_forever

    settings = ServiceSettings(results_dir=Path(results_dir), limits=Limits(max_running=max_running),
                               database=database)
    task_store = InMemoryTaskStore() if store == "memory" else None
    app = build_app(settings, f"http://127.0.0.1:{port}", task_store=task_store)
    serve_forever(app, "127.0.0.1", port, log_level="warning")


@contextmanager
def bench_service(store: str, max_running: int, database: str | None = None) -> Iterator[str]:
    port = free_port()
    with tempfile.TemporaryDirectory() as results, serving_process(
            [sys.executable, __file__, "--serve", store, str(port), results, str(max_running),
             *([database] if database else [])], port) as url:
        yield url


def evaluation(endpoint: str, tasks: list[str]) -> dict[str, Any]:
    return {"domain": "airline", "agent_endpoint": endpoint, "user": "scripted_user", "user_llm": "scripted",
            "task_ids": tasks, "max_concurrency": 1}


async def start_evaluations(url: str, endpoint: str, count: int, tasks_each: int) -> list[str]:
    """Start `count` evaluations (return immediately); their A2A task ids."""
    from a2a.client import ClientCallContext
    from a2a.types import SendMessageConfiguration, SendMessageRequest

    from tau2_a2a.service.client import connect, request_message

    client, http = await connect(url)
    task_ids = []
    try:
        for index in range(count):
            tasks = [str((index * tasks_each + k) % 50) for k in range(tasks_each)]
            request = SendMessageRequest(
                message=request_message("run_tau2_evaluation", evaluation(endpoint, tasks)),
                configuration=SendMessageConfiguration(return_immediately=True))
            async for event in client.send_message(request, context=ClientCallContext(timeout=120)):
                task_ids.append(event.task.id)
                break
    finally:
        await http.aclose()
    return task_ids


async def evaluation_ids(url: str) -> list[str]:
    from tau2_a2a.service.client import connect, result_data

    client, http = await connect(url)
    try:
        return [e["evaluation_id"] for e in result_data(await call(client, "list_evaluations"))["evaluations"]]
    finally:
        await http.aclose()


async def poll(url: str, task_ids: list[str], ids: list[str], seconds: float, pollers: int
               ) -> dict[str, list[float]]:
    """`pollers` clients alternating GetTask and get_evaluation for `seconds`; latencies in ms per call."""
    from a2a.types import GetTaskRequest

    from tau2_a2a.service.client import connect

    latencies: dict[str, list[float]] = {"GetTask": [], "get_evaluation": []}
    deadline = time.perf_counter() + seconds

    async def poller(index: int) -> None:
        client, http = await connect(url)
        try:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                await client.get_task(GetTaskRequest(id=task_ids[index % len(task_ids)]))
                latencies["GetTask"].append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                await call(client, "get_evaluation", {"evaluation_id": ids[index % len(ids)]})
                latencies["get_evaluation"].append((time.perf_counter() - started) * 1000)
        finally:
            await http.aclose()

    await asyncio.gather(*(poller(index) for index in range(pollers)))
    return latencies


def polling_arm(store: str, endpoint: str, args: argparse.Namespace, database: str | None = None
                ) -> dict[str, list[float]]:
    with bench_service(store, max_running=args.evaluations, database=database) as url:
        task_ids = asyncio.run(start_evaluations(url, endpoint, args.evaluations, args.tasks_each))
        ids = asyncio.run(evaluation_ids(url))
        time.sleep(args.warmup)  # the evaluations' processes start
        return asyncio.run(poll(url, task_ids, ids, args.seconds, args.pollers))


async def wait_all_done(urls: list[str], expected: int, timeout: float = 1800) -> None:
    from tau2_a2a.service.client import connect, result_data

    client, http = await connect(urls[0])
    deadline = time.perf_counter() + timeout
    try:
        while time.perf_counter() < deadline:
            records = result_data(await call(client, "list_evaluations"))["evaluations"]
            if len(records) == expected and all(r["status"] == "completed" for r in records):
                return
            await asyncio.sleep(0.5)
    finally:
        await http.aclose()
    raise TimeoutError("the evaluations did not finish")


def throughput_arm(replicas: int, database: str, endpoint: str, args: argparse.Namespace) -> float:
    """Wall time of `--throughput-evaluations` evaluations spread over `replicas` replicas of one database."""
    with tempfile.TemporaryDirectory() as results, ExitStack() as stack:
        urls = []
        for index in range(replicas):
            url, _ = stack.enter_context(service_process(
                free_port(), Path(results), "--database", database, "--replica-id", f"replica-{index}",
                "--max-running", "2", "--max-queued", str(args.throughput_evaluations)))
            urls.append(url)
        started = time.perf_counter()
        for index in range(args.throughput_evaluations):  # spread the requests as a load balancer would
            asyncio.run(start_evaluations(urls[index % replicas], endpoint, 1, 2))
        asyncio.run(wait_all_done(urls, args.throughput_evaluations))
        return time.perf_counter() - started


def summary_line(name: str, values: list[float]) -> str:
    if not values:
        return f"| {name} | 0 | - | - |"
    return f"| {name} | {len(values)} | {percentile(values, 50):.1f} | {percentile(values, 99):.1f} |"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(int(sys.argv[3]), sys.argv[4], sys.argv[2], int(sys.argv[5]), (sys.argv[6:] or [None])[0])
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pollers", type=int, default=50)
    parser.add_argument("--evaluations", type=int, default=8)
    parser.add_argument("--tasks-each", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--delay", type=float, default=0.3, help="the slow oracle's delay per reply")
    parser.add_argument("--throughput-evaluations", type=int, default=8)
    parser.add_argument("--skip-replicas", action="store_true")
    args = parser.parse_args()
    print("$ " + " ".join([Path(sys.executable).name, *sys.argv]))
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores\n")

    from tests.postgres_server import PostgresServer

    server = PostgresServer()
    try:
        with oracle_process(free_port(), delay=args.delay) as slow:
            arms = {
                "sqlite": polling_arm("database", slow, args),
                "postgresql": polling_arm("database", slow, args,
                                          server.create_database(f"poll_{uuid.uuid4().hex[:8]}")),
                "memory": polling_arm("memory", slow, args),
            }
        print(f"## Polling: {args.pollers} pollers, {args.evaluations} evaluations running, "
              f"{args.seconds:.0f} s each arm")
        print("| calls (A2A tasks in) | n | p50 ms | p99 ms |\n| --- | --- | --- | --- |")
        for store, latencies in arms.items():
            for name, values in latencies.items():
                print(summary_line(f"{name} ({store})", values))
        for store in ("sqlite", "postgresql"):
            p99 = max(percentile(v, 99) for v in arms[store].values() if v)
            print(f"\nTarget p99 < {TARGET_P99_MS:.0f} ms on {store}: "
                  f"{'met' if p99 < TARGET_P99_MS else 'missed'} ({p99:.1f} ms)")
            for name in ("GetTask", "get_evaluation"):
                database, memory = arms[store][name], arms["memory"][name]
                if database and memory:
                    print(f"{name}: {store}/in-memory p50 {percentile(database, 50) / percentile(memory, 50):.2f}x, "
                          f"p99 {percentile(database, 99) / percentile(memory, 99):.2f}x")
        print("(evaluation records are in the database in every arm; only the A2A task store differs)")
        if args.skip_replicas:
            return 0
        with oracle_process(free_port()) as fast:
            walls = {replicas: throughput_arm(replicas, server.create_database(f"load_{uuid.uuid4().hex[:8]}"),
                                              fast, args) for replicas in (1, 2)}
    finally:
        server.stop()
    n = args.throughput_evaluations
    print(f"\n## Throughput: {n} evaluations of 2 airline tasks, PostgreSQL, --max-running 2 per replica")
    print("| replicas | wall s | evaluations per minute |\n| --- | --- | --- |")
    for replicas, wall in walls.items():
        print(f"| {replicas} | {wall:.1f} | {n / wall * 60:.1f} |")
    print(f"\ntwo replicas / one: {walls[1] / walls[2]:.2f}x the throughput "
          f"(on {os.cpu_count()} cores, which the replicas share)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
