"""tau2's run, as tau2-a2a runs it.

`runs` plans and runs the simulations in tau2's terms; `orchestration`
ends a simulation on an A2A failure and carries the run's session;
`results_file`, `layout` and `provenance` say where its files are, how they
are written and what they measured; `resume` and `review_record` keep a
resumed run the same run; `accounting` and `traces` record what each
conversation cost and where its time went; `stopping` handles Ctrl-C;
`fidelity` compares scores with tau2's own.
"""
