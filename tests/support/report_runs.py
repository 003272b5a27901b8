"""Real tau2 runs over A2A for the report tests: a clean oracle run and one with failures of several kinds."""

from __future__ import annotations

from pathlib import Path

from a2a.helpers import new_text_part
from a2a.server.agent_execution import RequestContext
from a2a.server.events import EventQueue

from tau2_a2a.protocol.hosting import BackgroundServer, free_port
from tests.support.executors import OracleLike, Seen, agent_app
from tests.support.runs import run_a2a

TASKS = ["0", "1", "3", "20"]  # task 20 books a flight in both tau2 distributions' task data
TRIALS = 3


class FlakyOracle(OracleLike):
    """The oracle, except that:

    - task "1" fails its first conversation only (the A2A task ends FAILED: a protocol error);
    - task "20" says goodbye at once in its first two conversations (the user stops, the DB check fails:
      the task books a flight);
    - task "3" ends every conversation as FAILED.
    """

    def __init__(self) -> None:
        super().__init__()
        self.opened: dict[str, int] = {}

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        if seen.turn.system is not None and seen.task is not None:
            self.opened[seen.task] = self.opened.get(seen.task, 0) + 1
        nth = self.opened.get(seen.task or "", 0)
        if (seen.task == "1" and nth == 1) or seen.task == "3":
            await self.fail(event_queue, seen)
        elif seen.task == "20" and nth <= 2 and seen.turn.system is not None:
            await self.answer(event_queue, seen, [new_text_part("Thank you for calling. Goodbye!")])
        else:
            await super().respond(context, event_queue, seen)

    async def fail(self, event_queue: EventQueue, seen: Seen) -> None:
        from a2a.helpers import new_task
        from a2a.server.tasks import TaskUpdater
        from a2a.types import TaskState

        await event_queue.enqueue_event(new_task(seen.a2a_task_id, seen.context_id, TaskState.TASK_STATE_SUBMITTED))
        updater = TaskUpdater(event_queue, seen.a2a_task_id, seen.context_id)
        await updater.failed(updater.new_agent_message([new_text_part("the booking system is down")]))


def flaky_run(results_dir: Path, save_to: str = "flaky") -> Path:
    """Airline tasks 0, 1, 3 and 20, three trials, one at a time, against FlakyOracle; returns the results file."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with BackgroundServer(agent_app(FlakyOracle(), url), port=port):
        return run_a2a(url, results_dir, task_ids=TASKS, num_trials=TRIALS, max_concurrency=1,
                       save_to=save_to).results_path


def oracle_run(url: str, results_dir: Path, save_to: str = "oracle") -> Path:
    """The same tasks and trials against the reference oracle; returns the results file."""
    return run_a2a(url, results_dir, task_ids=TASKS, num_trials=TRIALS, max_concurrency=1,
                   save_to=save_to).results_path


if __name__ == "__main__":
    import sys

    from tau2_a2a.protocol.hosting import a2a_app
    from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card

    out = Path(sys.argv[1])
    print(flaky_run(out))
    port = free_port()
    with BackgroundServer(a2a_app(OracleExecutor(), oracle_card(f"http://127.0.0.1:{port}")), port=port):
        print(oracle_run(f"http://127.0.0.1:{port}", out))
