"""An evaluation's life in the service, from its request to what it produced.

    manager.py     EvaluationManager: the way in (submit, get, list, wait, cancel); start() and close()
    evaluation.py  EvaluationRecord: one evaluation, typed; EvaluationView: as callers see it
    scheduler.py   what this replica runs and when: the queue's next, leases renewed, dead replicas' work
                   taken over, cancel passed on, each end recorded
    supervisor.py  the children of this replica: started, watched until they exit, stopped
    child.py       one child process: `python -m tau2_a2a.runner`, its settings on stdin, its priority, its stop
    forkserver.py  the fork server: tau2 imported once, one child forked per evaluation (warm starts)
    warm.py        the service's side of it: started, ready or not, a forked child as the supervisor sees it
    outcome.py     how an evaluation ended, from its run's outcome file, in the service's words
    progress.py    progress and the final result, from tau2's results file
    interfaces.py  the parts as small interfaces: RecordStore, JobQueue, Clock, ChildStarter (and ChildProcess)
    store.py       the records in the database: written, read, listed (only stored)
    queue.py       the queue and the leases on the same table: claims, renewals, cancel requests, A2A followers
    database.py    the SQL database (SQLite, or PostgreSQL for replicas) and its one table
    memory.py      the records and the queue in memory, with the SQL versions' contract (tests, trials)
    directory.py   an evaluation's private directory; the records of the earlier file layout, imported
    limits.py      what one service accepts at once
    errors.py      EvaluationError

    request (EvaluationRequest, ../request.py)
        -> manager.submit -> record (queued, in store) -> scheduler claims it from queue
        -> supervisor starts its child (child.py: the request as RunSettings) -> the run
        -> the run's outcome file -> outcome.py -> record (ended, in store)
"""
