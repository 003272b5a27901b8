"""The seam between tau2-a2a and tau2-bench: every use of tau2's internals is in this package.

It has four parts, one concept each:

- `seam`: the one module that imports tau2 (`seam.imports`), the names the
  rest of tau2-a2a uses from it (`seam.distribution`, whose halves `nvidia`
  and `upstream` each satisfy `seam.protocol.Tau2Seam`), and the hooks a run
  enters to put tau2-a2a's parts into tau2 and take them out again.
- `participants`: who takes part in a simulation, in tau2's terms: the A2A
  agent (its tools as messages or over MCP), the scripted user and the oracle.
- `speed`: environments built from databases read once per process.
- `run`: tau2's run as tau2-a2a runs it: the plan, the orchestrator that
  turns an A2A failure into an `agent_error` ending, the results file and
  its layout, resume, review, cost and time accounting, traces, Ctrl-C.

Importing it changes nothing in tau2 nor in the process: tau2-a2a's parts
are put in place by `seam.hooks.tau2_hooks()`, which a run enters.
"""
