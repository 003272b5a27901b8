"""The contract of the records and the queue, held by the SQL versions and the in-memory ones alike."""

from __future__ import annotations

from dataclasses import replace

from tau2_a2a.service.jobs.evaluation import Status
from tau2_a2a.service.jobs.memory import memory_store_and_queue
from tau2_a2a.service.jobs.queue import FollowedTask
from tests.service.jobs.conftest import Backend
from tests.support.jobs import record

NOW = 1_800_000_000.0


def test_records_are_kept_whole_in_the_order_they_were_queued(backend: Backend) -> None:
    first, second = record(tasks=2), record(agent_auth=True)
    backend.store.insert(first)
    backend.store.insert(second, held_by="a", lease_until=NOW + 30)
    assert backend.store.get(first.evaluation_id) == first
    assert backend.store.all() == [first, second]
    assert backend.store.ids() == {first.evaluation_id, second.evaluation_id}
    assert backend.store.get("ev-000000000000") is None


def test_a_record_is_written_only_while_its_replica_holds_it_and_an_ended_one_is_held_by_nobody(
        backend: Backend) -> None:
    queued = record()
    backend.store.insert(queued)
    running = backend.queue.claim_queued("a", NOW + 30)
    assert running is not None and running.status == Status.RUNNING
    assert not backend.store.save(running.running("b", resumed=False), held_by="b")
    assert backend.store.save(running.running("a", resumed=False), held_by="a")
    assert backend.store.get(queued.evaluation_id) == running.running("a", resumed=False)
    backend.queue.request_cancel(queued.evaluation_id)
    assert backend.store.save(running.ended(Status.COMPLETED, None, {"metrics": {}}), held_by="a")
    assert backend.store.get(queued.evaluation_id).status == Status.COMPLETED  # type: ignore[union-attr]
    # ended: no owner, lease or cancel request left to renew, take over or pass on
    assert backend.queue.renew("a", NOW + 60) == set()
    assert backend.queue.cancel_requests("a") == set()
    assert backend.queue.claim_expired("b", NOW + 99, now=NOW + 98) == []


def test_the_queue_is_claimed_in_order_one_replica_per_evaluation(backend: Backend) -> None:
    records = [record() for _ in range(3)]
    for queued in records:
        backend.store.insert(queued)
    assert [backend.queue.position(r.evaluation_id) for r in records] == [1, 2, 3]
    assert backend.queue.queued_count() == 3
    claimed = backend.queue.claim_queued("a", NOW + 30)
    assert claimed is not None and claimed.evaluation_id == records[0].evaluation_id
    assert claimed.status == Status.RUNNING
    assert backend.queue.position(records[0].evaluation_id) is None
    assert [backend.queue.position(r.evaluation_id) for r in records[1:]] == [1, 2]
    second = backend.queue.claim_queued("b", NOW + 30)
    assert second is not None and second.evaluation_id == records[1].evaluation_id
    assert backend.queue.renew("a", NOW + 40) == {records[0].evaluation_id}
    assert backend.queue.renew("b", NOW + 40) == {records[1].evaluation_id}


def test_a_queued_evaluation_that_needs_a_replicas_token_is_claimed_by_that_replica_only(backend: Backend) -> None:
    needs_token, free = record(agent_auth=True), record()
    backend.store.insert(needs_token, held_by="a", lease_until=NOW + 30)
    backend.store.insert(free)
    assert backend.queue.claim_queued("b", NOW + 30).evaluation_id == free.evaluation_id  # type: ignore[union-attr]
    assert backend.queue.claim_queued("b", NOW + 30) is None
    assert backend.queue.claim_queued("a", NOW + 30).evaluation_id == needs_token.evaluation_id  # type: ignore[union-attr]


def test_canceling_a_queued_evaluation_is_a_compare_and_set(backend: Backend) -> None:
    queued, running = record(), record()
    backend.store.insert(running)
    backend.store.insert(queued)
    assert backend.queue.claim_queued("a", NOW + 30).evaluation_id == running.evaluation_id  # type: ignore[union-attr]
    assert backend.queue.cancel_queued(queued.evaluation_id)
    assert not backend.queue.cancel_queued(queued.evaluation_id)
    assert not backend.queue.cancel_queued(running.evaluation_id)
    assert backend.store.get(queued.evaluation_id).status == Status.CANCELED  # type: ignore[union-attr]
    assert backend.queue.queued_count() == 0 and backend.queue.position(queued.evaluation_id) is None


def test_cancel_requests_reach_the_replica_that_runs_the_evaluation(backend: Backend) -> None:
    running, ended = record(), record()
    for r in (running, ended):
        backend.store.insert(r)
    backend.queue.claim_queued("a", NOW + 30)
    backend.queue.cancel_queued(ended.evaluation_id)
    backend.queue.request_cancel(running.evaluation_id)
    backend.queue.request_cancel(ended.evaluation_id)  # ended already: nothing to stop
    assert backend.queue.cancel_requests("a") == {running.evaluation_id}
    assert backend.queue.cancel_requests("b") == set()


def test_a_lease_that_ran_out_is_taken_over_once_and_a_renewed_one_is_not(backend: Backend) -> None:
    kept, lost = record(), record()
    for r in (kept, lost):
        backend.store.insert(r)
    backend.queue.claim_queued("a", NOW + 30)
    backend.queue.claim_queued("dead", NOW + 30)
    assert backend.queue.claim_expired("b", NOW + 60, now=NOW + 20) == []  # both leases still run
    backend.queue.renew("a", NOW + 70)
    taken = backend.queue.claim_expired("b", NOW + 90, now=NOW + 31)
    assert [(r.evaluation_id, r.status) for r in taken] == [(lost.evaluation_id, Status.RUNNING)]
    assert backend.queue.claim_expired("c", NOW + 90, now=NOW + 31) == []  # b holds it now
    assert backend.queue.renew("b", NOW + 91) == {lost.evaluation_id}
    assert backend.queue.renew("dead", NOW + 91) == set()


def test_a_queued_row_taken_over_goes_back_to_the_shared_queue(backend: Backend) -> None:
    queued = record()
    backend.store.insert(queued, held_by="dead", lease_until=NOW)
    taken = backend.queue.claim_expired("b", NOW + 30, now=NOW + 1)
    assert [(r.evaluation_id, r.status) for r in taken] == [(queued.evaluation_id, Status.QUEUED)]
    backend.queue.requeue(queued.evaluation_id, "b")
    assert backend.queue.claim_queued("c", NOW + 30).evaluation_id == queued.evaluation_id  # type: ignore[union-attr]


def test_a_replica_that_stops_releases_its_leases_at_once(backend: Backend) -> None:
    running = record()
    backend.store.insert(running)
    backend.queue.claim_queued("a", NOW + 30)
    backend.queue.link_task(running.evaluation_id, "task-1", "context-1", "a", NOW + 30)
    backend.queue.release("a")
    assert [r.evaluation_id for r in backend.queue.claim_expired("b", NOW + 30, now=NOW)] == [running.evaluation_id]
    assert backend.queue.claim_orphaned_tasks("b", NOW + 30, now=NOW) == [
        FollowedTask(running.evaluation_id, "task-1", "context-1")]


def test_at_start_a_service_alone_on_its_database_takes_over_every_active_row(backend: Backend) -> None:
    """One service per SQLite file (and per unshared in-memory table): what is there was left by its earlier life."""
    running, ended = record(), record()
    for r in (running, ended):
        backend.store.insert(r)
    backend.queue.claim_queued("old", NOW + 3600)
    backend.queue.cancel_queued(ended.evaluation_id)
    taken = backend.queue.claim_expired("new", NOW + 30, now=NOW, at_start=True)
    assert [r.evaluation_id for r in taken] == [running.evaluation_id]


def test_a_shared_table_at_start_takes_back_only_its_own_and_the_expired() -> None:
    """As replicas on PostgreSQL: at start, a replica takes back the rows its earlier life held, not a live
    replica's."""
    store, queue = memory_store_and_queue(shared=True)
    mine, theirs = record(), record()
    for r in (mine, theirs):
        store.insert(r)
    queue.claim_queued("me", NOW + 3600)
    queue.claim_queued("other", NOW + 3600)
    assert [r.evaluation_id for r in queue.claim_expired("me", NOW + 30, now=NOW, at_start=True)] == [
        mine.evaluation_id]


def test_followed_tasks_are_found_unlinked_and_handed_over_when_their_follower_dies(backend: Backend) -> None:
    followed, done = record(), record()
    for r in (followed, done):
        backend.store.insert(r)
    backend.queue.link_task(followed.evaluation_id, "task-1", "context-1", "a", NOW + 30)
    backend.queue.link_task(done.evaluation_id, "task-2", "context-2", "a", NOW + 30)
    assert backend.queue.evaluation_of_task("task-2") == done.evaluation_id
    assert backend.queue.evaluation_of_task("task-9") is None
    backend.queue.unlink_task(done.evaluation_id)  # its final event was sent: nobody continues it
    assert backend.queue.claim_orphaned_tasks("b", NOW + 60, now=NOW + 10) == []
    backend.queue.renew("a", NOW + 40)
    assert backend.queue.claim_orphaned_tasks("b", NOW + 60, now=NOW + 35) == []  # renewed
    assert backend.queue.claim_orphaned_tasks("b", NOW + 60, now=NOW + 41) == [
        FollowedTask(followed.evaluation_id, "task-1", "context-1")]
    assert backend.queue.claim_orphaned_tasks("c", NOW + 60, now=NOW + 41) == []


def test_the_status_column_and_the_record_agree(backend: Backend) -> None:
    queued = record()
    backend.store.insert(queued)
    backend.queue.cancel_queued(queued.evaluation_id)
    assert backend.store.all() == [replace(queued, status=Status.CANCELED)]
